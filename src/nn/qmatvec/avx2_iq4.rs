//! AVX2 decoders of the non-linear 4-bit types `IQ4_NL` (blocks of 32) and `IQ4_XS`
//! (super-blocks of 256): the nibbles index the 16 levels of
//! [`KVALUES_IQ4NL`] with one byte shuffle, the levels are widened to f32 and multiplied by
//! the block's f32 scale, one product as [`crate::io::gguf::iquants`] computes it, so every
//! weight has the bits `dequantize` gives. The dot products are `avx2.rs`'s (`IQ4_NL`) and
//! `avx2_k.rs`'s (`IQ4_XS`) on these decoders; AVX-512 CPUs run them too.

use std::arch::x86_64::*;

use super::avx2_lanes::{Block, half, nibbles, widen};
use crate::io::gguf::iquants::{IQ4_XS_BYTES, KVALUES_IQ4NL, iq4_xs_scales};

/// `d·k[n]` for the 32 nibbles of the 16 bytes at `p` (low nibbles are weights 0..16).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn levels(d: f32, p: *const u8) -> Block {
    // SAFETY: the table is 16 bytes; the caller points `p` at 16 readable bytes.
    let (table, (lo, hi)) = unsafe { (_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()), nibbles(p)) };
    // Every index is below 16, so the shuffle is a plain table lookup.
    let (a, b) = widen(_mm_shuffle_epi8(table, lo), true);
    let (c, e) = widen(_mm_shuffle_epi8(table, hi), true);
    let d = _mm256_set1_ps(d);
    [a, b, c, e].map(|w| _mm256_mul_ps(w, d))
}

/// IQ4_NL block at `p` (18 bytes): `d·k[n]`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn iq4_nl(p: *const u8) -> Block {
    // SAFETY (all loads): the caller points `p` at a whole block.
    unsafe { levels(half(p), p.add(2)) }
}

/// Sub-block `j` of the IQ4_XS super-block at `b`: `dl_j·k[n]`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn iq4_xs(b: *const u8, j: usize, dl: &[f32; 8]) -> Block {
    // SAFETY: the caller points `b` at a whole super-block.
    unsafe { levels(dl[j], b.add(8 + 16 * j)) }
}

/// The eight sub-block scales `d·(ls − 32)` of the IQ4_XS super-block at `b`.
///
/// # Safety
/// `b` points at a whole `IQ4_XS` super-block.
#[inline]
pub(super) unsafe fn iq4_xs_dl(b: *const u8) -> [f32; 8] {
    // SAFETY: the caller's contract.
    iq4_xs_scales(unsafe { std::slice::from_raw_parts(b, IQ4_XS_BYTES) })
}
