//! x86 bodies of the integer dot products of [`super::q8`]: one 32-weight block is one 256-bit
//! register of bytes (a 5-bit type adds its fifth bits, spread to bytes, to the nibbles), multiplied with the block's rounded activations into eight i32 sums by
//! VNNI's `vpdpbusd` (AVX-512 VNNI with VL) or by AVX2's `vpmaddubsw` + `vpmaddwd`. Both
//! multiply unsigned weights by signed activations: 4-bit nibbles are unsigned already; Q8_0
//! multiplies `|w|` by `x` with `w`'s sign (`vpsignb`), as llama.cpp does. No i16 sum can
//! saturate: at most 2·128·127 = 32,512. Eight blocks at a time, each block's sums are
//! reduced to one lane (`sums8`), so the blocks' scales and offsets are multiplied as vectors
//! of eight instead of one scalar conversion and broadcast per block.
//!
//! The super-block types (Q4_K, Q5_K, Q6_K) are in `x86_q8_k.rs`, built on the same
//! reductions.
//!
//! Callers guarantee the CPU features and the shapes: `data` holds `y.len()` rows of `cols`
//! weights of `ty`, and `x` holds `cols` rounded values.

use std::arch::x86_64::*;

use super::avx2_lanes::half;
use super::q8_vector::{BLOCK, Q8Row};
use super::x86_q8_lanes::{dp_avx2, dp_vnni};
use crate::io::gguf::GgmlType;
use crate::io::gguf::blocks::{self as fmt, BlockFormat};

/// The bodies for one instruction set: `$dp(w, x)` is the eight i32 sums of a block.
macro_rules! q8_bodies {
    ($module:ident, $features:literal, $dp:ident, $bits:ident) => {
        pub(super) mod $module {
            use super::*;
            use crate::nn::qmatvec::x86_q8_k::$module as k;
            use crate::nn::qmatvec::x86_q8_lanes::$module::{hsum, sums8};

            /// The 16 nibbles at `p` as 32 bytes: low nibbles (weights 0..16), then high.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn nibbles(p: *const u8) -> __m256i {
                // SAFETY: the caller points `p` at 16 readable bytes.
                let v = unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(p.cast())) };
                // The high 128 bits shifted right by 4, then every byte's low nibble.
                let v = _mm256_srlv_epi32(v, _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0));
                _mm256_and_si256(v, _mm256_set1_epi8(15))
            }

            /// The 16 nibbles at `nib` plus 16 for each set bit of the u32 at `qh`: the 32
            /// weights of a 5-bit block.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn fives(nib: *const u8, qh: *const u8) -> __m256i {
                // SAFETY: the caller points both at their bytes in one block.
                unsafe {
                    let high = $bits(qh.cast::<u32>().read_unaligned());
                    _mm256_or_si256(nibbles(nib), high)
                }
            }

            /// `Σ_b (d_w·d_x)·Σ n·q + o_w·s_x` over the `nb` 4- or 5-bit blocks of one row,
            /// for each of the `R` rounded rows `xs`: `$bytes` bytes a block, weights from
            /// `$weights(block)`, offset `o_w` given by `$offset(block, d_w)`, or for eight
            /// blocks at once by `$offset8(first block, $bytes, their d_w)`.
            ///
            /// Eight blocks at a time, each block's integer sum is reduced to one lane, so the
            /// scales, offsets and their products are vectors of eight blocks: per block that
            /// saves the two scalar half-precision conversions, a broadcast and a conversion
            /// of the sums, which made this loop limited by instructions rather than by
            /// memory. The eight blocks' weights, scales and offsets are unpacked once for all
            /// `R` rows (a batch or a prompt); each row's floating-point operations are those
            /// of `R = 1`, in the same order, so its result does not depend on `R`. The rest
            /// (fewer than eight blocks) goes block by block.
            macro_rules! dot4 {
                ($name:ident, $bytes:expr, $weights:expr, $offset:expr, $offset8:expr) => {
                    #[target_feature(enable = $features)]
                    #[inline]
                    unsafe fn $name<const R: usize>(
                        p: *const u8,
                        xs: &[Q8Row<'_>; R],
                        nb: usize,
                    ) -> [f32; R] {
                        // Lane i of `acc8[r]`/`off8[r]` sums row r's blocks b with b % 8 == i.
                        let mut acc8 = [_mm256_setzero_ps(); R];
                        let mut off8 = [_mm256_setzero_ps(); R];
                        let mut b = 0;
                        while b + 8 <= nb {
                            // SAFETY: blocks b..b + 8 of the row and of every `x` exist (the
                            // caller's contract).
                            unsafe {
                                let p8 = p.add(b * $bytes);
                                let w = |i: usize| $weights(p8.add(i * $bytes));
                                let dw = halves8(p8, $bytes, 0);
                                let o8 = $offset8(p8, $bytes, dw);
                                let xq = |r: usize, i: usize| {
                                    _mm256_loadu_si256(xs[r].q.as_ptr().add((b + i) * BLOCK).cast())
                                };
                                let mut finish = |r: usize, sums: __m256i| {
                                    let (d, s) = (xs[r].d.as_ptr(), xs[r].s.as_ptr());
                                    let scale = _mm256_mul_ps(dw, _mm256_loadu_ps(d.add(b)));
                                    acc8[r] =
                                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc8[r]);
                                    off8[r] =
                                        _mm256_fmadd_ps(o8, _mm256_loadu_ps(s.add(b)), off8[r]);
                                };
                                if R == 1 {
                                    // One row: each block unpacked as it is multiplied (no
                                    // eight registers held for later rows).
                                    finish(0, sums8(|i| $dp(w(i), xq(0, i))));
                                } else {
                                    let ws = [w(0), w(1), w(2), w(3), w(4), w(5), w(6), w(7)];
                                    for r in 0..R {
                                        finish(r, sums8(|i| $dp(ws[i], xq(r, i))));
                                    }
                                }
                            }
                            b += 8;
                        }
                        let mut out = [0.0; R];
                        for r in 0..R {
                            let (q, d, s) = (xs[r].q.as_ptr(), xs[r].d.as_ptr(), xs[r].s.as_ptr());
                            // Block b's scaled sums and its offset term.
                            let block = |b: usize| {
                                // SAFETY: as above; `x` has `nb` scales.
                                unsafe {
                                    let blk = p.add(b * $bytes);
                                    let dw = half(blk);
                                    let xq = _mm256_loadu_si256(q.add(b * BLOCK).cast());
                                    let dot = _mm256_cvtepi32_ps($dp($weights(blk), xq));
                                    let scale = _mm256_set1_ps(dw * *d.add(b));
                                    (dot, scale, $offset(blk, dw) * *s.add(b))
                                }
                            };
                            // Two accumulators (named: an indexed array is kept on the stack),
                            // so consecutive blocks' multiply-adds overlap.
                            let (mut a0, mut a1) = (acc8[r], _mm256_setzero_ps());
                            let (mut o0, mut o1) = (hsum(off8[r]), 0.0f32);
                            let mut b = b;
                            while b + 2 <= nb {
                                let (v0, s0, f0) = block(b);
                                let (v1, s1, f1) = block(b + 1);
                                a0 = _mm256_fmadd_ps(v0, s0, a0);
                                a1 = _mm256_fmadd_ps(v1, s1, a1);
                                o0 += f0;
                                o1 += f1;
                                b += 2;
                            }
                            if b < nb {
                                let (v0, s0, f0) = block(b);
                                a0 = _mm256_fmadd_ps(v0, s0, a0);
                                o0 += f0;
                            }
                            out[r] = hsum(_mm256_add_ps(a0, a1)) + (o0 + o1);
                        }
                        out
                    }
                };
            }

            /// The eight half-precision numbers at byte `at` of the eight blocks from `p`,
            /// `bytes` apart, as f32.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn halves8(p: *const u8, bytes: usize, at: usize) -> __m256 {
                // SAFETY: the caller points `p` at eight whole blocks.
                let h = |i: usize| unsafe { p.add(i * bytes + at).cast::<i16>().read_unaligned() };
                _mm256_cvtph_ps(_mm_set_epi16(
                    h(7),
                    h(6),
                    h(5),
                    h(4),
                    h(3),
                    h(2),
                    h(1),
                    h(0),
                ))
            }

            /// Q4_0's offsets of eight blocks: `−8·d_w`.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn q4_0_offset8(_: *const u8, _: usize, dw: __m256) -> __m256 {
                _mm256_mul_ps(dw, _mm256_set1_ps(-8.0))
            }

            /// Q4_1's (and Q5_1's) offsets of eight blocks: their `m`.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn q4_1_offset8(p: *const u8, bytes: usize, _: __m256) -> __m256 {
                // SAFETY: the caller points `p` at eight whole blocks.
                unsafe { halves8(p, bytes, 2) }
            }

            /// Q5_0's offsets of eight blocks: `−16·d_w`.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn q5_0_offset8(_: *const u8, _: usize, dw: __m256) -> __m256 {
                _mm256_mul_ps(dw, _mm256_set1_ps(-16.0))
            }

            /// Q4_0's offset: `−8·d_w`.
            #[inline(always)]
            unsafe fn q4_0_offset(_: *const u8, dw: f32) -> f32 {
                -8.0 * dw
            }

            /// Q4_1's offset: the block's `m`.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn q4_1_offset(blk: *const u8, _: f32) -> f32 {
                // SAFETY: `blk` is a whole 20-byte block.
                unsafe { half(blk.add(2)) }
            }

            /// Q5_0's offset: `−16·d_w`.
            #[inline(always)]
            unsafe fn q5_0_offset(_: *const u8, dw: f32) -> f32 {
                -16.0 * dw
            }

            /// The weights of a block at `b` of each type (offsets of its nibbles and `qh`).
            macro_rules! weights {
                ($name:ident, $body:expr) => {
                    #[target_feature(enable = $features)]
                    #[inline]
                    unsafe fn $name(b: *const u8) -> __m256i {
                        // SAFETY: the caller points `b` at a whole block of the type.
                        unsafe { $body(b) }
                    }
                };
            }
            weights!(w_q4_0, |b: *const u8| nibbles(b.add(2)));
            weights!(w_q4_1, |b: *const u8| nibbles(b.add(4)));
            weights!(w_q5_0, |b: *const u8| fives(b.add(6), b.add(2)));
            weights!(w_q5_1, |b: *const u8| fives(b.add(8), b.add(4)));

            dot4!(
                dot_q4_0,
                fmt::Q4_0::BYTES,
                w_q4_0,
                q4_0_offset,
                q4_0_offset8
            );
            dot4!(
                dot_q4_1,
                fmt::Q4_1::BYTES,
                w_q4_1,
                q4_1_offset,
                q4_1_offset8
            );
            dot4!(
                dot_q5_0,
                fmt::Q5_0::BYTES,
                w_q5_0,
                q5_0_offset,
                q5_0_offset8
            );
            dot4!(
                dot_q5_1,
                fmt::Q5_1::BYTES,
                w_q5_1,
                q4_1_offset,
                q4_1_offset8
            );

            /// `Σ_b (d_w·d_x)·Σ w·q` over the `nb` Q8_0 blocks of one row, for each of the
            /// `R` rows `xs` (the eight blocks' weights and scales loaded once for all; each
            /// row's result that of `R = 1`, as in `dot4`).
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn dot_q8_0<const R: usize>(
                p: *const u8,
                xs: &[Q8Row<'_>; R],
                nb: usize,
            ) -> [f32; R] {
                // `|w|·(x with w's sign)`: `vpmaddubsw` multiplies unsigned by signed bytes.
                let dp8 =
                    |w: __m256i, xq: __m256i| $dp(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xq, w));
                // Eight blocks at a time, as the 4-bit bodies (`dot4`) do.
                let mut acc8 = [_mm256_setzero_ps(); R];
                let mut b = 0;
                while b + 8 <= nb {
                    // SAFETY: blocks b..b + 8 of the row and of every `x` exist.
                    unsafe {
                        let w = |i: usize| {
                            _mm256_loadu_si256(p.add((b + i) * fmt::Q8_0::BYTES + 2).cast())
                        };
                        let ws = [w(0), w(1), w(2), w(3), w(4), w(5), w(6), w(7)];
                        let dw = halves8(p.add(b * fmt::Q8_0::BYTES), fmt::Q8_0::BYTES, 0);
                        for r in 0..R {
                            let q = xs[r].q.as_ptr();
                            let sums = sums8(|i| {
                                dp8(ws[i], _mm256_loadu_si256(q.add((b + i) * BLOCK).cast()))
                            });
                            let scale = _mm256_mul_ps(dw, _mm256_loadu_ps(xs[r].d.as_ptr().add(b)));
                            acc8[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc8[r]);
                        }
                    }
                    b += 8;
                }
                let mut out = [0.0; R];
                for r in 0..R {
                    let (q, d) = (xs[r].q.as_ptr(), xs[r].d.as_ptr());
                    let block = |b: usize| {
                        // SAFETY: as in the 4-bit bodies.
                        unsafe {
                            let w = _mm256_loadu_si256(p.add(b * fmt::Q8_0::BYTES + 2).cast());
                            let xq = _mm256_loadu_si256(q.add(b * BLOCK).cast());
                            let dot = _mm256_cvtepi32_ps(dp8(w, xq));
                            (
                                dot,
                                _mm256_set1_ps(half(p.add(b * fmt::Q8_0::BYTES)) * *d.add(b)),
                            )
                        }
                    };
                    let (mut a0, mut a1) = (acc8[r], _mm256_setzero_ps());
                    let mut b = b;
                    while b + 2 <= nb {
                        let (v0, s0) = block(b);
                        let (v1, s1) = block(b + 1);
                        a0 = _mm256_fmadd_ps(v0, s0, a0);
                        a1 = _mm256_fmadd_ps(v1, s1, a1);
                        b += 2;
                    }
                    if b < nb {
                        let (v0, s0) = block(b);
                        a0 = _mm256_fmadd_ps(v0, s0, a0);
                    }
                    out[r] = hsum(_mm256_add_ps(a0, a1));
                }
                out
            }

            /// `ys[j][r] = Σ_c W[r, c]·xs[j][c]` for every row `r` of `data` and each of the
            /// `R` rounded rows `xs` (`ty` one of [`super::super::q8::supports`]): each
            /// weight block is unpacked once for the `R` rows (the super-block types, row by
            /// row), and `ys[j]` equals the product of `xs[j]` alone, bit for bit.
            #[target_feature(enable = $features)]
            pub(in crate::nn::qmatvec) unsafe fn matvec<const R: usize>(
                ty: GgmlType,
                data: &[u8],
                cols: usize,
                xs: &[Q8Row<'_>; R],
                ys: &mut [&mut [f32]; R],
            ) {
                let (per, bytes) = ty.block();
                let rb = cols / per * bytes;
                let nb = cols / BLOCK;
                for r in 0..ys[0].len() {
                    // SAFETY: row r of `data` is in bounds (the caller's contract); every `x`
                    // holds `nb` blocks.
                    let out = unsafe {
                        let row = data.as_ptr().add(r * rb);
                        // One row of `x` at a time.
                        macro_rules! each {
                            ($f:expr) => {{
                                let mut o = [0.0; R];
                                for (o, x) in o.iter_mut().zip(xs) {
                                    *o = $f(*x);
                                }
                                o
                            }};
                        }
                        match ty {
                            GgmlType::Q8_0 => dot_q8_0(row, xs, nb),
                            GgmlType::Q4_0 => dot_q4_0(row, xs, nb),
                            GgmlType::Q4_1 => dot_q4_1(row, xs, nb),
                            GgmlType::Q5_0 => dot_q5_0(row, xs, nb),
                            GgmlType::Q5_1 => dot_q5_1(row, xs, nb),
                            GgmlType::Q4_K => each!(|x| k::dot_k4::<false>(row, x, nb / 8)),
                            GgmlType::Q5_K => each!(|x| k::dot_k4::<true>(row, x, nb / 8)),
                            GgmlType::Q6_K => each!(|x| k::dot_q6_k(row, x, nb / 8)),
                            _ => unreachable!("q8::supports admits the types above only"),
                        }
                    };
                    for (y, o) in ys.iter_mut().zip(out) {
                        y[r] = o;
                    }
                }
            }
        }
    };
}

/// 16 in byte `j` for each set bit `j` of `qh`, by an AVX-512 byte mask.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
fn bits_avx512(qh: u32) -> __m256i {
    _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(16))
}

/// The same by AVX2: byte `j` takes byte `j/8` of `qh`, is ORed with all bits but `j % 8`, and
/// compared with all ones (llama.cpp's `bytes_from_bits_32`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn bits_avx2(qh: u32) -> __m256i {
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(qh as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
    let set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1));
    _mm256_and_si256(set, _mm256_set1_epi8(16))
}

q8_bodies!(
    vnni,
    "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c",
    dp_vnni,
    bits_avx512
);
q8_bodies!(avx2, "avx2,fma,f16c", dp_avx2, bits_avx2);
