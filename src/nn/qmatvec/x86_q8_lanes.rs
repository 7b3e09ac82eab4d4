//! The integer reductions both x86 integer bodies share ([`super::x86_q8`] for the 32-weight
//! blocks, [`super::x86_q8_k`] for the super-blocks): a block's eight i32 sums of `u8 × i8`
//! products (VNNI's `vpdpbusd` or AVX2's `vpmaddubsw` + `vpmaddwd`), eight blocks' sums
//! reduced to one lane each, and the horizontal sum.

use std::arch::x86_64::*;

/// Eight i32 sums of `u8 × i8` products, four adjacent each, by AVX-512 VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
pub(in crate::nn::qmatvec) fn dp_vnni(w: __m256i, x: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x)
}

/// The same sums by AVX2: pairs into i16, then pairs of those into i32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(in crate::nn::qmatvec) fn dp_avx2(w: __m256i, x: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1))
}

/// The reductions for one instruction set.
macro_rules! lanes {
    ($module:ident, $features:literal) => {
        pub(in crate::nn::qmatvec) mod $module {
            use std::arch::x86_64::*;

            /// Lane `i` the sum of the eight i32 lanes of `one(i)`.
            #[target_feature(enable = $features)]
            #[inline]
            pub(in crate::nn::qmatvec) fn sums8(one: impl Fn(usize) -> __m256i) -> __m256i {
                // Pairs, then quads: u0 holds the half sums of blocks 0..4 (low then high 128
                // bits of each), u1 those of 4..8; adding the halves finishes them.
                let pairs = |i: usize| _mm256_hadd_epi32(one(i), one(i + 1));
                let u0 = _mm256_hadd_epi32(pairs(0), pairs(2));
                let u1 = _mm256_hadd_epi32(pairs(4), pairs(6));
                _mm256_add_epi32(
                    _mm256_permute2x128_si256::<0x20>(u0, u1),
                    _mm256_permute2x128_si256::<0x31>(u0, u1),
                )
            }

            /// The sum of the eight lanes.
            #[target_feature(enable = $features)]
            #[inline]
            pub(in crate::nn::qmatvec) fn hsum(v: __m256) -> f32 {
                let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
                _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
            }
        }
    };
}

lanes!(vnni, "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c");
lanes!(avx2, "avx2,fma,f16c");
