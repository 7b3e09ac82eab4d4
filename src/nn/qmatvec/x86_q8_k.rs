//! x86 bodies of the super-block integer dot products of `q8_k.rs` (Q4_K, Q5_K, Q6_K with a
//! [`Q8Vector`]). A super-block's eight 32-weight sub-blocks meet eight consecutive blocks of
//! `x`, so each sub-block's eight i32 sums are reduced to one lane (`sums8` of `x86_q8.rs`)
//! and the eight scales, minimums and activation scales are multiplied as vectors: per 256
//! weights one conversion and two multiply-adds.
//!
//! - Q4_K/Q5_K: the nibbles of 32 bytes give two sub-blocks (low, then high, nibbles); Q5_K
//!   adds bit `j` of each `qh` byte times 16. Unsigned weights times signed activations, by
//!   `$dp` (VNNI's `vpdpbusd` or AVX2's `vpmaddubsw` + `vpmaddwd`): at most 2·31·128 per i16.
//! - Q6_K: `(n − 32)·q` as `vpmaddubsw(n, q) − vpmaddubsw(32, q)` (at most 2·32·128 in
//!   magnitude per i16), then `vpmaddwd` with the two halves' signed scales: the scaled sum
//!   stays in integers (at most 8·2·8192·128 per lane), as llama.cpp's AVX2 body does. Both
//!   instruction sets run this AVX2 body.
//!
//! Callers guarantee the CPU features and the shapes: the row holds `nsb` super-blocks and `x`
//! holds `8·nsb` rounded blocks.

/// The bodies for one instruction set (`$module` names the `x86_q8_lanes` module with the same
/// reductions; `$dp(w, x)` is the eight i32 sums of a block).
macro_rules! q8_k_bodies {
    ($module:ident, $features:literal, $dp:path) => {
        pub(super) mod $module {
            use std::arch::x86_64::*;

            use crate::io::gguf::kquants::{Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES, scale_min_k4_all};
            use crate::nn::qmatvec::avx2_lanes::half;
            use crate::nn::qmatvec::q8_vector::{BLOCK, Q8Row};
            use crate::nn::qmatvec::x86_q8_lanes::$module::{hsum, sums8};

            /// The eight bytes at `p` as f32.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn u8x8(p: *const u8) -> __m256 {
                // SAFETY: the caller points `p` at eight readable bytes.
                unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast()))) }
            }

            /// `Σ` over the `nsb` Q4_K (`FIVE` false) or Q5_K super-blocks of one row.
            #[target_feature(enable = $features)]
            #[inline]
            pub(in crate::nn::qmatvec) unsafe fn dot_k4<const FIVE: bool>(
                p: *const u8,
                x: Q8Row<'_>,
                nsb: usize,
            ) -> f32 {
                let bytes = if FIVE { Q5_K_BYTES } else { Q4_K_BYTES };
                let (q, d, s) = (x.q.as_ptr(), x.d.as_ptr(), x.s.as_ptr());
                let low = _mm256_set1_epi8(15);
                let one = _mm256_set1_epi8(1);
                let (mut acc, mut off) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                for sb in 0..nsb {
                    // SAFETY: super-block sb of the row and blocks 8·sb..8·sb + 8 of `x`
                    // exist (the caller's contract).
                    unsafe {
                        let blk = p.add(sb * bytes);
                        let sm = scale_min_k4_all(std::slice::from_raw_parts(blk.add(4), 12));
                        let qs = blk.add(if FIVE { 48 } else { 16 });
                        let qh = if FIVE {
                            _mm256_loadu_si256(blk.add(16).cast())
                        } else {
                            _mm256_setzero_si256()
                        };
                        let k0 = 8 * sb;
                        let sums = sums8(|j| {
                            let v = _mm256_loadu_si256(qs.add(32 * (j / 2)).cast());
                            let v = if j % 2 == 1 {
                                _mm256_srli_epi16::<4>(v)
                            } else {
                                v
                            };
                            let mut n = _mm256_and_si256(v, low);
                            if FIVE {
                                // Bit j of each byte, to bit 4 (the shift crosses into the
                                // byte above only bits the mask then drops).
                                let count = _mm_cvtsi32_si128(j as i32);
                                let bit = _mm256_and_si256(_mm256_srl_epi16(qh, count), one);
                                n = _mm256_or_si256(n, _mm256_slli_epi16::<4>(bit));
                            }
                            let xq = _mm256_loadu_si256(q.add((k0 + j) * BLOCK).cast());
                            $dp(n, xq)
                        });
                        let scale = _mm256_mul_ps(
                            _mm256_mul_ps(_mm256_set1_ps(half(blk)), u8x8(sm.as_ptr())),
                            _mm256_loadu_ps(d.add(k0)),
                        );
                        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc);
                        let mins = _mm256_mul_ps(
                            _mm256_set1_ps(half(blk.add(2))),
                            u8x8(sm.as_ptr().add(8)),
                        );
                        off = _mm256_fmadd_ps(mins, _mm256_loadu_ps(s.add(k0)), off);
                    }
                }
                hsum(acc) - hsum(off)
            }

            /// `Σ` over the `nsb` Q6_K super-blocks of one row.
            #[target_feature(enable = $features)]
            #[inline]
            pub(in crate::nn::qmatvec) unsafe fn dot_q6_k(
                p: *const u8,
                x: Q8Row<'_>,
                nsb: usize,
            ) -> f32 {
                let (q, d) = (x.q.as_ptr(), x.d.as_ptr());
                let (low, two) = (_mm256_set1_epi8(15), _mm256_set1_epi8(3));
                let m32 = _mm256_set1_epi8(32);
                let mut acc = _mm256_setzero_ps();
                for sb in 0..nsb {
                    // SAFETY: as in `dot_k4`.
                    unsafe {
                        let blk = p.add(sb * Q6_K_BYTES);
                        let (ql, qh, sc) = (blk, blk.add(128), blk.add(192).cast::<i8>());
                        let k0 = 8 * sb;
                        let sums = sums8(|j| {
                            // Sub-block j: run j % 4 of half j / 4 (see `kquants::q6`).
                            let (half, run) = (j / 4, j % 4);
                            let lo = _mm256_loadu_si256(ql.add(64 * half + 32 * (run % 2)).cast());
                            let lo = if run >= 2 {
                                _mm256_srli_epi16::<4>(lo)
                            } else {
                                lo
                            };
                            let hi = _mm256_loadu_si256(qh.add(32 * half).cast());
                            let count = _mm_cvtsi32_si128(2 * run as i32);
                            let hi = _mm256_and_si256(_mm256_srl_epi16(hi, count), two);
                            let n = _mm256_or_si256(
                                _mm256_and_si256(lo, low),
                                _mm256_slli_epi16::<4>(hi),
                            );
                            let xq = _mm256_loadu_si256(q.add((k0 + j) * BLOCK).cast());
                            let prod = _mm256_sub_epi16(
                                _mm256_maddubs_epi16(n, xq),
                                _mm256_maddubs_epi16(m32, xq),
                            );
                            // The first 16 weights (low 128 bits) take scale 2j, the rest 2j + 1.
                            let scales = _mm256_set_m128i(
                                _mm_set1_epi16(i16::from(*sc.add(2 * j + 1))),
                                _mm_set1_epi16(i16::from(*sc.add(2 * j))),
                            );
                            _mm256_madd_epi16(prod, scales)
                        });
                        let scale = _mm256_mul_ps(
                            _mm256_set1_ps(half(blk.add(208))),
                            _mm256_loadu_ps(d.add(k0)),
                        );
                        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc);
                    }
                }
                hsum(acc)
            }
        }
    };
}

q8_k_bodies!(
    vnni,
    "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c",
    crate::nn::qmatvec::x86_q8_lanes::dp_vnni
);
q8_k_bodies!(
    avx2,
    "avx2,fma,f16c",
    crate::nn::qmatvec::x86_q8_lanes::dp_avx2
);
