//! The ggml tensor types this crate reads, and their dequantisation to f32. What each type
//! is (id, block size, bytes, decoding) is its [`super::blocks::BlockFormat`]; this enum is
//! the run-time choice among them.

pub use super::blocks::GgmlType;
use super::blocks::{BlockFormat, with_format};
/// The names of ggml type ids, for error messages about types we do not read.
fn type_name(id: u32) -> &'static str {
    match id {
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        21 => "IQ3_S",
        22 => "IQ2_S",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        _ => "unknown",
    }
}

impl GgmlType {
    /// Every type this crate reads.
    pub const ALL: [GgmlType; 13] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::BF16,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
    ];

    /// The type for a ggml id, or a message naming the unsupported type.
    pub fn from_id(id: u32) -> Result<Self, String> {
        if let Some(&t) = Self::ALL.iter().find(|t| t.id() == id) {
            return Ok(t);
        }
        Err(format!(
            "tensor type {} (id {id}) is not supported; supported: F32, F16, BF16, Q8_0, Q4_0, \
             Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS",
            type_name(id)
        ))
    }

    /// The ggml id.
    pub fn id(self) -> u32 {
        with_format!(self, F => F::ID)
    }

    /// (weights per block, bytes per block).
    pub fn block(self) -> (usize, usize) {
        with_format!(self, F => (F::WEIGHTS, F::BYTES))
    }

    /// Bytes taken by `n` weights, or `None` when `n` is not a whole number of blocks or the
    /// size overflows.
    pub fn byte_size(self, n: u64) -> Option<u64> {
        let (per, bytes) = self.block();
        if !n.is_multiple_of(per as u64) {
            return None;
        }
        (n / per as u64).checked_mul(bytes as u64)
    }
}

/// Dequantises `raw` (exactly `ty.byte_size(out.len())` bytes) into `out`.
pub fn dequantize(ty: GgmlType, raw: &[u8], out: &mut [f32]) {
    let (per, bytes) = ty.block();
    debug_assert_eq!(raw.len(), out.len() / per * bytes);
    with_format!(ty, F => F::dequantize(raw, out))
}
