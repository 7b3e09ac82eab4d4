//! Little-endian scalars inside quantised blocks, shared by the dequantisers (`dtype`,
//! `kquants`, `iquants`) and the quantised products (`nn::qmatvec`) without a circle
//! between the block formats and their dispatch.

use half::f16;

/// The little-endian f16 at byte `i` of `b`, as f32.
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}
