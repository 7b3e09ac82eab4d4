//! AVX2 bodies for the 256-weight super-block types (`Q4_K`, `Q5_K`, `Q6_K`, and `IQ4_XS`
//! whose decoder is in `avx2_iq4.rs`) and BF16: a super-block is eight sub-blocks of 32
//! weights, each decoded into four registers of 8 f32 with the reference's operations in the
//! reference's order ([`crate::io::gguf::kquants`], [`crate::io::gguf::iquants`]), so every
//! weight has the bits `dequantize` gives.
//!
//! Callers guarantee the CPU features (by [`crate::nn::simd::isa`]) and the shapes: `data`
//! holds whole super-blocks (or BF16 values) and `x` the matching activations.

use std::arch::x86_64::*;

use super::avx2_iq4::{iq4_xs, iq4_xs_dl};
use super::avx2_lanes::hsum;
use crate::io::gguf::GgmlType;
use crate::io::gguf::iquants::IQ4_XS_BYTES;
use crate::io::gguf::kquants::{Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES, QK_K, k4_scales};

/// Four registers: weights 0..8, 8..16, 16..24, 24..32 of a sub-block.
type Block = [__m256; 4];

/// The 32 unsigned bytes of `v` as four registers of f32, in order.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn widen32(v: __m256i) -> Block {
    let (lo, hi) = (_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)]
        .map(|h| _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(h)))
}

/// Bits `shift..shift+width` of each of the 32 bytes at `p` (shifts of 16-bit lanes leak
/// the neighbour byte's bits only above the mask).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn field(p: *const u8, shift: i32, mask: i8) -> __m256i {
    // SAFETY: the caller points `p` at 32 readable bytes.
    let v = unsafe { _mm256_loadu_si256(p.cast()) };
    let s = _mm256_srl_epi16(v, _mm_cvtsi32_si128(shift));
    _mm256_and_si256(s, _mm256_set1_epi8(mask))
}

/// Sub-block `j` of the `Q4_K` block at `b`: `d·q − m`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q4_k(b: *const u8, j: usize, sm: &[(f32, f32); 8]) -> Block {
    // SAFETY: the caller points `b` at a whole block.
    let q = unsafe { field(b.add(16 + 32 * (j / 2)), 4 * (j % 2) as i32, 0x0F) };
    let (d, m) = (_mm256_set1_ps(sm[j].0), _mm256_set1_ps(sm[j].1));
    widen32(q).map(|w| _mm256_sub_ps(_mm256_mul_ps(w, d), m))
}

/// Sub-block `j` of the `Q5_K` block at `b`: `d·q − m`, bit `j` of `qh` on top of the nibble.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q5_k(b: *const u8, j: usize, sm: &[(f32, f32); 8]) -> Block {
    // SAFETY: the caller points `b` at a whole block.
    let (lo, hi) = unsafe {
        (
            field(b.add(48 + 32 * (j / 2)), 4 * (j % 2) as i32, 0x0F),
            field(b.add(16), j as i32, 1),
        )
    };
    let q = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(hi));
    let (d, m) = (_mm256_set1_ps(sm[j].0), _mm256_set1_ps(sm[j].1));
    widen32(q).map(|w| _mm256_sub_ps(_mm256_mul_ps(w, d), m))
}

/// Sub-block `s` of the `Q6_K` block at `b`: `(d·sc)·(q − 32)`, scales `ds[2s]` for the first
/// 16 weights and `ds[2s + 1]` for the rest.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q6_k(b: *const u8, s: usize, ds: &[f32; 16]) -> Block {
    let (half, run) = (s / 4, s % 4);
    // SAFETY: the caller points `b` at a whole block.
    let (lo, hi) = unsafe {
        (
            field(
                b.add(64 * half + 32 * (run % 2)),
                4 * (run / 2) as i32,
                0x0F,
            ),
            field(b.add(128 + 32 * half), 2 * run as i32, 3),
        )
    };
    let q = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(hi));
    let (s0, s1) = (_mm256_set1_ps(ds[2 * s]), _mm256_set1_ps(ds[2 * s + 1]));
    let t = _mm256_set1_ps(32.0);
    let w = widen32(q).map(|w| _mm256_sub_ps(w, t));
    [
        _mm256_mul_ps(s0, w[0]),
        _mm256_mul_ps(s0, w[1]),
        _mm256_mul_ps(s1, w[2]),
        _mm256_mul_ps(s1, w[3]),
    ]
}

/// `d·sc` for the 16 scales of the `Q6_K` block at `b`.
///
/// # Safety
/// `b` points at a whole `Q6_K` block.
#[inline]
unsafe fn q6_scales(b: *const u8) -> [f32; 16] {
    // SAFETY: the caller's contract.
    let blk = unsafe { std::slice::from_raw_parts(b, Q6_K_BYTES) };
    let d = half::f16::from_le_bytes([blk[208], blk[209]]).to_f32();
    std::array::from_fn(|i| d * f32::from(blk[192 + i] as i8))
}

/// Per-block scales of `$ty` and the decoder of one sub-block: `Σ w·x` over `nb` super-blocks,
/// and dequantisation of whole super-blocks.
macro_rules! k_type {
    ($dot:ident, $deq:ident, $bytes:expr, $decode:ident, $scales:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $dot(p: *const u8, x: *const f32, nb: usize) -> f32 {
            let mut a = [_mm256_setzero_ps(); 4];
            for b in 0..nb {
                // SAFETY: super-block b of `p` and values 256b..256b+256 of `x` are readable.
                unsafe {
                    let blk = p.add(b * $bytes);
                    let sc = $scales(blk);
                    for j in 0..8 {
                        let w = $decode(blk, j, &sc);
                        let xb = x.add(b * QK_K + 32 * j);
                        for k in 0..4 {
                            a[k] = _mm256_fmadd_ps(w[k], _mm256_loadu_ps(xb.add(8 * k)), a[k]);
                        }
                    }
                }
            }
            hsum(_mm256_add_ps(
                _mm256_add_ps(a[0], a[1]),
                _mm256_add_ps(a[2], a[3]),
            ))
        }

        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $deq(p: *const u8, out: &mut [f32]) {
            for (b, o) in out.chunks_exact_mut(QK_K).enumerate() {
                // SAFETY: super-block b exists for every 256 outputs.
                unsafe {
                    let blk = p.add(b * $bytes);
                    let sc = $scales(blk);
                    for j in 0..8 {
                        let w = $decode(blk, j, &sc);
                        for (k, v) in w.into_iter().enumerate() {
                            _mm256_storeu_ps(o.as_mut_ptr().add(32 * j + 8 * k), v);
                        }
                    }
                }
            }
        }
    };
}

/// `(d·sc, dmin·m)` of the eight sub-blocks of the `Q4_K`/`Q5_K` block at `b`.
///
/// # Safety
/// `b` points at 16 readable bytes.
#[inline]
unsafe fn k4(b: *const u8) -> [(f32, f32); 8] {
    // SAFETY: the caller's contract.
    k4_scales(unsafe { std::slice::from_raw_parts(b, 16) })
}

k_type!(dot_q4_k, deq_q4_k, Q4_K_BYTES, q4_k, k4);
k_type!(dot_q5_k, deq_q5_k, Q5_K_BYTES, q5_k, k4);
k_type!(dot_q6_k, deq_q6_k, Q6_K_BYTES, q6_k, q6_scales);
k_type!(dot_iq4_xs, deq_iq4_xs, IQ4_XS_BYTES, iq4_xs, iq4_xs_dl);

/// Eight BF16 values at `p` as f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn bf16x8(p: *const u8) -> __m256 {
    // SAFETY: the caller points `p` at 16 readable bytes.
    let v = _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(p.cast()) });
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v))
}

fn bf16_at(w: &[u8], i: usize) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes([w[2 * i], w[2 * i + 1]])) << 16)
}

/// `Σ w·x` over `n` BF16 weights.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_bf16(w: &[u8], x: *const f32, n: usize) -> f32 {
    let mut a = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    // SAFETY (every read): weights 0..n (2 bytes each) and values 0..n are readable.
    unsafe {
        while i + 16 <= n {
            for (j, acc) in a.iter_mut().enumerate() {
                let o = i + 8 * j;
                *acc = _mm256_fmadd_ps(
                    bf16x8(w.as_ptr().add(2 * o)),
                    _mm256_loadu_ps(x.add(o)),
                    *acc,
                );
            }
            i += 16;
        }
        let mut s = hsum(_mm256_add_ps(a[0], a[1]));
        while i < n {
            s += bf16_at(w, i) * *x.add(i);
            i += 1;
        }
        s
    }
}

/// `Σ_c W[row, c]·x[c]` for one row of a super-block type or BF16 (`None` for other types).
///
/// # Safety
/// AVX2/FMA/F16C are available; `row` holds `cols` weights of `ty`; `x` holds `cols` values.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_row(ty: GgmlType, row: &[u8], x: &[f32], cols: usize) -> Option<f32> {
    let (p, xp, nb) = (row.as_ptr(), x.as_ptr(), cols / QK_K);
    // SAFETY: the caller's contract.
    unsafe {
        Some(match ty {
            GgmlType::Q4_K => dot_q4_k(p, xp, nb),
            GgmlType::Q5_K => dot_q5_k(p, xp, nb),
            GgmlType::Q6_K => dot_q6_k(p, xp, nb),
            GgmlType::IQ4_XS => dot_iq4_xs(p, xp, nb),
            GgmlType::BF16 => dot_bf16(row, xp, cols),
            _ => return None,
        })
    }
}

/// Dequantises `data` (whole super-blocks of `ty`, or BF16 values) into `out`; `false` for
/// other types.
///
/// # Safety
/// AVX2/FMA/F16C are available; `data` holds `out.len()` weights of `ty`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dequantize(ty: GgmlType, data: &[u8], out: &mut [f32]) -> bool {
    let p = data.as_ptr();
    // SAFETY: the caller's contract.
    unsafe {
        match ty {
            GgmlType::Q4_K => deq_q4_k(p, out),
            GgmlType::Q5_K => deq_q5_k(p, out),
            GgmlType::Q6_K => deq_q6_k(p, out),
            GgmlType::IQ4_XS => deq_iq4_xs(p, out),
            GgmlType::BF16 => {
                let mut chunks = out.chunks_exact_mut(8);
                let mut i = 0;
                for o in &mut chunks {
                    _mm256_storeu_ps(o.as_mut_ptr(), bf16x8(p.add(2 * i)));
                    i += 8;
                }
                for o in chunks.into_remainder() {
                    *o = bf16_at(data, i);
                    i += 1;
                }
            }
            _ => return false,
        }
    }
    true
}
