//! AVX2 bodies of the 5-bit block types `Q5_0` and `Q5_1` (32 weights a block), which
//! llama.cpp's K-quant files use for matrices whose rows are not whole 256-weight
//! super-blocks. The fifth bits (one u32 `qh` a block) are spread over bytes with a shuffle
//! and a bit test, then joined to the nibbles; each weight is then computed as
//! [`crate::io::gguf::dtype::dequantize`] computes it: `d·(q − 16)` or `d·q + m`, not fused.
//! The dot products are `avx2.rs`'s, on these decoders; AVX-512 CPUs run them too.

use std::arch::x86_64::*;

use super::avx2_lanes::{Block, half, nibbles, widen};

/// The fifth bits of weights `8k..8k+8` for `k` in `[b0, b0+1]` as bytes of 0 or 16.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn high_bits(qh: u32, b0: i8) -> __m128i {
    let v = _mm_set1_epi32(qh as i32);
    let b1 = b0 + 1;
    let spread = _mm_setr_epi8(
        b0, b0, b0, b0, b0, b0, b0, b0, b1, b1, b1, b1, b1, b1, b1, b1,
    );
    let bit = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    let set = _mm_cmpeq_epi8(_mm_and_si128(_mm_shuffle_epi8(v, spread), bit), bit);
    _mm_and_si128(set, _mm_set1_epi8(16))
}

/// The 32 five-bit codes of the block whose `qh` is at `p` (the nibbles follow it), as
/// four registers of f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn codes(p: *const u8) -> Block {
    // SAFETY (all loads): the caller points `p` at `qh` and the 16 bytes after it.
    let qh = unsafe { p.cast::<u32>().read_unaligned() }.to_le();
    let (lo, hi) = unsafe { nibbles(p.add(4)) };
    let lo = _mm_or_si128(lo, high_bits(qh, 0));
    let hi = _mm_or_si128(hi, high_bits(qh, 2));
    let ((a, b), (c, e)) = (widen(lo, false), widen(hi, false));
    [a, b, c, e]
}

/// Q5_0 block at `p` (22 bytes): `d·(q − 16)`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn q5_0(p: *const u8) -> Block {
    // SAFETY (all loads): the caller points `p` at a whole block.
    let d = _mm256_set1_ps(unsafe { half(p) });
    let sixteen = _mm256_set1_ps(16.0);
    // q − 16 is exact in f32, so subtracting after the conversion matches `d·(q − 16)`.
    unsafe { codes(p.add(2)) }.map(|w| _mm256_mul_ps(_mm256_sub_ps(w, sixteen), d))
}

/// Q5_1 block at `p` (24 bytes): `d·q + m` (multiply, then add: not fused).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn q5_1(p: *const u8) -> Block {
    // SAFETY (all loads): the caller points `p` at a whole block.
    let d = _mm256_set1_ps(unsafe { half(p) });
    let m = _mm256_set1_ps(unsafe { half(p.add(2)) });
    unsafe { codes(p.add(4)) }.map(|w| _mm256_add_ps(_mm256_mul_ps(w, d), m))
}
