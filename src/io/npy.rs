//! NumPy `.npy` files (format version 1.0, little-endian f32/f64), written atomically.
//!
//! Layout: the magic `\x93NUMPY`, version `1 0`, a little-endian u16 header length, an ASCII
//! Python dict `{'descr': '<f4', 'fortran_order': False, 'shape': (a, b), }` padded with
//! spaces and ended by `\n` so the data starts on a 64-byte boundary, then the C-order data.

use std::io::Write;
use std::path::Path;

use crate::{Error, Result};

/// Element types the writer supports.
pub trait NpyElement: Copy {
    /// NumPy's `descr` string for the type.
    const DESCR: &'static str;
    /// The value's little-endian bytes, appended to `out`.
    fn put_le(self, out: &mut Vec<u8>);
}

impl NpyElement for f32 {
    const DESCR: &'static str = "<f4";
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyElement for f64 {
    const DESCR: &'static str = "<f8";
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// The `.npy` header (magic through the padded dict) for `shape` and element type `T`.
pub fn header<T: NpyElement>(shape: &[usize]) -> Vec<u8> {
    let dims = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        T::DESCR,
        dims
    );
    // 10 bytes of preamble + dict + '\n' must be a multiple of 64.
    let total = 10 + dict.len() + 1;
    let pad = (64 - total % 64) % 64;
    dict.extend(std::iter::repeat_n(' ', pad));
    dict.push('\n');
    let mut out = Vec::with_capacity(10 + dict.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// The full `.npy` file for C-order `data` of `shape`.
///
/// Panics if `data.len()` is not the product of `shape` (a programming error).
pub fn to_bytes<T: NpyElement>(data: &[T], shape: &[usize]) -> Vec<u8> {
    assert_eq!(
        data.len(),
        shape.iter().product::<usize>(),
        "npy: data length does not match the shape"
    );
    let mut out = header::<T>(shape);
    out.reserve(std::mem::size_of_val(data));
    for &v in data {
        v.put_le(&mut out);
    }
    out
}

/// Writes C-order `data` of `shape` to `path` as `.npy`, atomically.
pub fn write<T: NpyElement>(path: &Path, data: &[T], shape: &[usize]) -> Result<()> {
    let bytes = to_bytes(data, shape);
    crate::io::write_atomic(path, |w| {
        w.write_all(&bytes).map_err(|e| Error::io(path, e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_parsable() {
        let h = header::<f32>(&[3, 4]);
        assert_eq!(h.len() % 64, 0);
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.contains("'descr': '<f4'"));
        assert!(text.contains("'shape': (3, 4)"));
        assert!(text.ends_with('\n'));
        let b = to_bytes(&[1.0f64, 2.0], &[2]);
        let hl = header::<f64>(&[2]).len();
        assert_eq!(hl % 64, 0);
        assert!(std::str::from_utf8(&b[10..hl]).unwrap().contains("(2,)"));
        assert_eq!(&b[hl..hl + 8], &1.0f64.to_le_bytes());
        assert_eq!(b.len(), hl + 16);
    }
}
