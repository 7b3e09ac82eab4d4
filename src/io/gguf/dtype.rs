//! ggml tensor types and their dequantisation to f32.
//!
//! Block formats (32 weights per block, little-endian, `d`/`m` are f16):
//! - `Q8_0`: `d`, then 32 × i8 `q`; `x = d·q`.
//! - `Q4_0`: `d`, then 16 bytes; low nibbles are weights 0..16, high nibbles 16..32; `x = d·(q − 8)`.
//! - `Q4_1`: `d`, `m`, then 16 bytes as in `Q4_0`; `x = d·q + m`.
//! - `Q5_0`: `d`, 4 bytes `qh` (a little-endian u32), 16 bytes of nibbles as in `Q4_0`; bit `j`
//!   of `qh` is the fifth bit of weight `j`; `x = d·(q − 16)`.
//! - `Q5_1`: `d`, `m`, then `qh` and the nibbles as in `Q5_0`; `x = d·q + m`.
//!
//! The 256-weight super-block types (`Q4_K`, `Q5_K`, `Q6_K`) and BF16 are in `kquants`, the
//! non-linear 4-bit types (`IQ4_NL`, `IQ4_XS`) in `iquants`.

use half::f16;

use super::iquants as iq;
use super::kquants as kq;
use super::le::f16_at;

/// The tensor types this crate reads (named as ggml names them).
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit float.
    F16,
    /// 4-bit, scale only.
    Q4_0,
    /// 4-bit, scale and minimum.
    Q4_1,
    /// 5-bit, scale only.
    Q5_0,
    /// 5-bit, scale and minimum.
    Q5_1,
    /// 8-bit, scale only.
    Q8_0,
    /// bfloat16 (the high half of an f32).
    BF16,
    /// 4-bit super-blocks of 256 with 6-bit sub-block scales and minima.
    Q4_K,
    /// 5-bit super-blocks of 256 with 6-bit sub-block scales and minima.
    Q5_K,
    /// 6-bit super-blocks of 256 with 8-bit sub-block scales.
    Q6_K,
    /// 4-bit indices into a table of 16 non-uniform levels, scale only (blocks of 32).
    IQ4_NL,
    /// `IQ4_NL`'s levels in super-blocks of 256 with 6-bit sub-block scales.
    IQ4_XS,
}

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
    /// The type for a ggml id, or a message naming the unsupported type.
    pub fn from_id(id: u32) -> Result<Self, String> {
        Ok(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            12 => GgmlType::Q4_K,
            13 => GgmlType::Q5_K,
            14 => GgmlType::Q6_K,
            20 => GgmlType::IQ4_NL,
            23 => GgmlType::IQ4_XS,
            30 => GgmlType::BF16,
            _ => {
                return Err(format!(
                    "tensor type {} (id {id}) is not supported; supported: F32, F16, BF16, Q8_0, \
                     Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS",
                    type_name(id)
                ));
            }
        })
    }

    /// The ggml id.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q4_K => 12,
            GgmlType::Q5_K => 13,
            GgmlType::Q6_K => 14,
            GgmlType::IQ4_NL => 20,
            GgmlType::IQ4_XS => 23,
            GgmlType::BF16 => 30,
        }
    }

    /// (weights per block, bytes per block).
    pub fn block(self) -> (usize, usize) {
        match self {
            GgmlType::F32 => (1, 4),
            GgmlType::F16 => (1, 2),
            GgmlType::Q4_0 => (32, 18),
            GgmlType::Q4_1 => (32, 20),
            GgmlType::Q5_0 => (32, 22),
            GgmlType::Q5_1 => (32, 24),
            GgmlType::Q8_0 => (32, 34),
            GgmlType::BF16 => (1, 2),
            GgmlType::Q4_K => (kq::QK_K, kq::Q4_K_BYTES),
            GgmlType::Q5_K => (kq::QK_K, kq::Q5_K_BYTES),
            GgmlType::Q6_K => (kq::QK_K, kq::Q6_K_BYTES),
            GgmlType::IQ4_NL => (32, iq::IQ4_NL_BYTES),
            GgmlType::IQ4_XS => (kq::QK_K, iq::IQ4_XS_BYTES),
        }
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
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(raw.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(raw.chunks_exact(2)) {
                *o = f16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        GgmlType::Q8_0 => {
            for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(34)) {
                let d = f16_at(b, 0);
                for (x, &q) in o.iter_mut().zip(&b[2..]) {
                    *x = d * f32::from(q as i8);
                }
            }
        }
        GgmlType::BF16 => kq::dequantize_bf16(raw, out),
        GgmlType::Q4_K => kq::dequantize_q4_k(raw, out),
        GgmlType::Q5_K => kq::dequantize_q5_k(raw, out),
        GgmlType::Q6_K => kq::dequantize_q6_k(raw, out),
        GgmlType::IQ4_NL => iq::dequantize_iq4_nl(raw, out),
        GgmlType::IQ4_XS => iq::dequantize_iq4_xs(raw, out),
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let q5_1 = ty == GgmlType::Q5_1;
            let head = if q5_1 { 4 } else { 2 };
            for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(bytes)) {
                let d = f16_at(b, 0);
                let m = if q5_1 { f16_at(b, 2) } else { 0.0 };
                let qh = u32::from_le_bytes([b[head], b[head + 1], b[head + 2], b[head + 3]]);
                let qs = &b[head + 4..head + 20];
                for (j, &byte) in qs.iter().enumerate() {
                    let lo = (byte & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
                    let hi = (byte >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
                    // As ggml: `d·(q − 16)` (no `+ 0`, which would turn −0 into +0), `d·q + m`.
                    for (k, q) in [(j, lo), (j + 16, hi)] {
                        o[k] = if q5_1 {
                            d * f32::from(q) + m
                        } else {
                            d * (f32::from(q) - 16.0)
                        };
                    }
                }
            }
        }
        GgmlType::Q4_0 | GgmlType::Q4_1 => {
            let (head, min) = if ty == GgmlType::Q4_0 {
                (2, None)
            } else {
                (4, Some(()))
            };
            for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(bytes)) {
                let d = f16_at(b, 0);
                let (m, offset) = match min {
                    Some(()) => (f16_at(b, 2), 0.0),
                    None => (0.0, 8.0),
                };
                let qs = &b[head..head + 16];
                for j in 0..16 {
                    o[j] = d * (f32::from(qs[j] & 0x0F) - offset) + m;
                    o[j + 16] = d * (f32::from(qs[j] >> 4) - offset) + m;
                }
            }
        }
    }
}
