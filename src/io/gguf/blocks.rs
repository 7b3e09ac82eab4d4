//! The block formats, one type each: its ggml id, weights and bytes per block, and how its
//! bytes decode to f32, and the enum that chooses among them at run time ([`GgmlType`]).
//! The single source of these facts for the GGUF reader
//! ([`super::dtype::dequantize`]), the writers of quantised files
//! (`crate::quant`'s grids) and the integer and float kernels (`crate::nn::qmatvec`), which
//! name a format's sizes as `Q4_0::BYTES` instead of repeating them.
//!
//! Block layouts (32 weights per block, little-endian, `d`/`m` are f16):
//! - `Q8_0`: `d`, then 32 × i8 `q`; `x = d·q`.
//! - `Q4_0`: `d`, then 16 bytes; low nibbles are weights 0..16, high nibbles 16..32; `x = d·(q − 8)`.
//! - `Q4_1`: `d`, `m`, then 16 bytes as in `Q4_0`; `x = d·q + m`.
//! - `Q5_0`: `d`, 4 bytes `qh` (a little-endian u32), 16 bytes of nibbles as in `Q4_0`; bit `j`
//!   of `qh` is the fifth bit of weight `j`; `x = d·(q − 16)`.
//! - `Q5_1`: `d`, `m`, then `qh` and the nibbles as in `Q5_0`; `x = d·q + m`.
//!
//! The 256-weight super-blocks (`Q4_K`, `Q5_K`, `Q6_K`) and BF16 decode in `kquants`, the
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

/// One block format of a GGUF tensor.
pub trait BlockFormat {
    /// The [`GgmlType`] it is.
    const TYPE: GgmlType;
    /// Its ggml type id, as a GGUF tensor directory stores it.
    const ID: u32;
    /// Weights per block (1 for the float types).
    const WEIGHTS: usize;
    /// Bytes per block.
    const BYTES: usize;
    /// Decodes whole blocks: `raw` is `out.len() / WEIGHTS` blocks of `BYTES` bytes.
    fn dequantize(raw: &[u8], out: &mut [f32]);
}

macro_rules! block_format {
    ($(#[$doc:meta])* $name:ident, $id:expr, $weights:expr, $bytes:expr, $decode:expr) => {
        $(#[$doc])*
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl BlockFormat for $name {
            const TYPE: GgmlType = GgmlType::$name;
            const ID: u32 = $id;
            const WEIGHTS: usize = $weights;
            const BYTES: usize = $bytes;
            fn dequantize(raw: &[u8], out: &mut [f32]) {
                $decode(raw, out)
            }
        }
    };
}

block_format!(/** 32-bit float. */ F32, 0, 1, 4, f32s);
block_format!(/** 16-bit float. */ F16, 1, 1, 2, f16s);
block_format!(/** 4-bit, scale only. */ Q4_0, 2, 32, 18, q4::<false>);
block_format!(/** 4-bit, scale and minimum. */ Q4_1, 3, 32, 20, q4::<true>);
block_format!(/** 5-bit, scale only. */ Q5_0, 6, 32, 22, q5::<false>);
block_format!(/** 5-bit, scale and minimum. */ Q5_1, 7, 32, 24, q5::<true>);
block_format!(/** 8-bit, scale only. */ Q8_0, 8, 32, 34, q8_0);
block_format!(/** 4-bit super-blocks of 256. */ Q4_K, 12, kq::QK_K, kq::Q4_K_BYTES, kq::dequantize_q4_k);
block_format!(/** 5-bit super-blocks of 256. */ Q5_K, 13, kq::QK_K, kq::Q5_K_BYTES, kq::dequantize_q5_k);
block_format!(/** 6-bit super-blocks of 256. */ Q6_K, 14, kq::QK_K, kq::Q6_K_BYTES, kq::dequantize_q6_k);
block_format!(/** Non-linear 4-bit levels, blocks of 32. */ IQ4_NL, 20, 32, iq::IQ4_NL_BYTES, iq::dequantize_iq4_nl);
block_format!(/** Non-linear 4-bit levels in super-blocks of 256. */ IQ4_XS, 23, kq::QK_K, iq::IQ4_XS_BYTES, iq::dequantize_iq4_xs);
block_format!(/** bfloat16 (the high half of an f32). */ BF16, 30, 1, 2, kq::dequantize_bf16);

/// Runs `$body` with `$F` the [`BlockFormat`] of the [`GgmlType`] `$ty`.
macro_rules! with_format {
    ($ty:expr, $F:ident => $body:expr) => {{
        use $crate::io::gguf::blocks as b;
        match $ty {
            GgmlType::F32 => {
                type $F = b::F32;
                $body
            }
            GgmlType::F16 => {
                type $F = b::F16;
                $body
            }
            GgmlType::Q4_0 => {
                type $F = b::Q4_0;
                $body
            }
            GgmlType::Q4_1 => {
                type $F = b::Q4_1;
                $body
            }
            GgmlType::Q5_0 => {
                type $F = b::Q5_0;
                $body
            }
            GgmlType::Q5_1 => {
                type $F = b::Q5_1;
                $body
            }
            GgmlType::Q8_0 => {
                type $F = b::Q8_0;
                $body
            }
            GgmlType::Q4_K => {
                type $F = b::Q4_K;
                $body
            }
            GgmlType::Q5_K => {
                type $F = b::Q5_K;
                $body
            }
            GgmlType::Q6_K => {
                type $F = b::Q6_K;
                $body
            }
            GgmlType::IQ4_NL => {
                type $F = b::IQ4_NL;
                $body
            }
            GgmlType::IQ4_XS => {
                type $F = b::IQ4_XS;
                $body
            }
            GgmlType::BF16 => {
                type $F = b::BF16;
                $body
            }
        }
    }};
}
pub(crate) use with_format;

fn f32s(raw: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(raw.chunks_exact(4)) {
        *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

fn f16s(raw: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(raw.chunks_exact(2)) {
        *o = f16::from_le_bytes([c[0], c[1]]).to_f32();
    }
}

fn q8_0(raw: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(Q8_0::BYTES)) {
        let d = f16_at(b, 0);
        for (x, &q) in o.iter_mut().zip(&b[2..]) {
            *x = d * f32::from(q as i8);
        }
    }
}

/// `Q4_0` (`MIN` false) or `Q4_1`.
fn q4<const MIN: bool>(raw: &[u8], out: &mut [f32]) {
    let (head, bytes) = if MIN {
        (4, Q4_1::BYTES)
    } else {
        (2, Q4_0::BYTES)
    };
    for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(bytes)) {
        let d = f16_at(b, 0);
        let (m, offset) = if MIN { (f16_at(b, 2), 0.0) } else { (0.0, 8.0) };
        let qs = &b[head..head + 16];
        for j in 0..16 {
            o[j] = d * (f32::from(qs[j] & 0x0F) - offset) + m;
            o[j + 16] = d * (f32::from(qs[j] >> 4) - offset) + m;
        }
    }
}

/// `Q5_0` (`MIN` false) or `Q5_1`.
fn q5<const MIN: bool>(raw: &[u8], out: &mut [f32]) {
    let (head, bytes) = if MIN {
        (4, Q5_1::BYTES)
    } else {
        (2, Q5_0::BYTES)
    };
    for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(bytes)) {
        let d = f16_at(b, 0);
        let m = if MIN { f16_at(b, 2) } else { 0.0 };
        let qh = u32::from_le_bytes([b[head], b[head + 1], b[head + 2], b[head + 3]]);
        let qs = &b[head + 4..head + 20];
        for (j, &byte) in qs.iter().enumerate() {
            let lo = (byte & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
            let hi = (byte >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
            // As ggml: `d·(q − 16)` (no `+ 0`, which would turn −0 into +0), `d·q + m`.
            for (k, q) in [(j, lo), (j + 16, hi)] {
                o[k] = if MIN {
                    d * f32::from(q) + m
                } else {
                    d * (f32::from(q) - 16.0)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run-time table and the formats agree: each type dispatches to the format that
    /// names it, and ids round-trip.
    #[test]
    fn every_type_dispatches_to_its_own_format() {
        for t in GgmlType::ALL {
            assert_eq!(with_format!(t, F => F::TYPE), t);
            assert_eq!(GgmlType::from_id(t.id()), Ok(t));
        }
        let mut ids: Vec<u32> = GgmlType::ALL.iter().map(|t| t.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), GgmlType::ALL.len());
    }
}
