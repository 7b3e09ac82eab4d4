//! NumPy `.npy` files (format version 1.0, little-endian f32/f64), written atomically.
