//! The AVX2 building blocks every AVX2 body shares (`avx2.rs` and its per-format files
//! `avx2_q5.rs`, `avx2_iq4.rs`, `avx2_k.rs`, and the integer bodies' f16 scales): a block as
//! four registers, f16 loads, widening, nibbles and the horizontal sum.

use std::arch::x86_64::*;

/// Four registers: weights 0..8, 8..16, 16..24, 24..32 of a block.
pub(super) type Block = [__m256; 4];

/// The f16 at `p` as f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn half(p: *const u8) -> f32 {
    // SAFETY: the caller points `p` at two readable bytes.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// Bytes 0..8 and 8..16 of `v`, each widened to eight i32 (signed or not) and converted.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn widen(v: __m128i, signed: bool) -> (__m256, __m256) {
    let hi = _mm_srli_si128::<8>(v);
    let (a, b) = if signed {
        (_mm256_cvtepi8_epi32(v), _mm256_cvtepi8_epi32(hi))
    } else {
        (_mm256_cvtepu8_epi32(v), _mm256_cvtepu8_epi32(hi))
    };
    (_mm256_cvtepi32_ps(a), _mm256_cvtepi32_ps(b))
}

/// Low and high nibbles of the 16 bytes at `p` (weights 0..16 and 16..32), as bytes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn nibbles(p: *const u8) -> (__m128i, __m128i) {
    // SAFETY: the caller points `p` at 16 readable bytes.
    let q = unsafe { _mm_loadu_si128(p.cast()) };
    let m = _mm_set1_epi8(15);
    (
        _mm_and_si128(q, m),
        _mm_and_si128(_mm_srli_epi16::<4>(q), m),
    )
}

/// Sum of the eight lanes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}
