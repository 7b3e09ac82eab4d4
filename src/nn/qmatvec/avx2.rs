//! AVX2 bodies of the quantised kernels: a 32-weight block is four registers of 8 f32.
//!
//! Callers guarantee the CPU features (by [`crate::nn::simd::isa`]) and the shapes: `data`
//! holds `y.len()` rows of `cols` weights of `ty`, and `x` holds `cols` values.

use std::arch::x86_64::*;

use super::avx2_iq4::iq4_nl;
use super::avx2_lanes::{Block, half, hsum, nibbles, widen};
use super::avx2_q5::{q5_0, q5_1};
use crate::io::gguf::GgmlType;
use crate::io::gguf::blocks::{self as fmt, BlockFormat};

/// Q8_0 block at `p` (34 bytes): `d·q`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q8_0(p: *const u8) -> Block {
    // SAFETY (all loads): the caller points `p` at a whole block.
    let d = _mm256_set1_ps(unsafe { half(p) });
    let (a, b) = widen(unsafe { _mm_loadu_si128(p.add(2).cast()) }, true);
    let (c, e) = widen(unsafe { _mm_loadu_si128(p.add(18).cast()) }, true);
    [a, b, c, e].map(|w| _mm256_mul_ps(w, d))
}

/// Q4_0 block at `p` (18 bytes): `d·(q − 8)`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q4_0(p: *const u8) -> Block {
    // SAFETY (all loads): the caller points `p` at a whole block.
    let d = _mm256_set1_ps(unsafe { half(p) });
    let (lo, hi) = unsafe { nibbles(p.add(2)) };
    // q − 8 is exact in f32, so subtracting after the conversion matches `d·(q − 8)`.
    let eight = _mm256_set1_ps(8.0);
    let ((a, b), (c, e)) = (widen(lo, false), widen(hi, false));
    [a, b, c, e].map(|w| _mm256_mul_ps(_mm256_sub_ps(w, eight), d))
}

/// Q4_1 block at `p` (20 bytes): `d·q + m` (multiply, then add: not fused).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q4_1(p: *const u8) -> Block {
    // SAFETY (all loads): the caller points `p` at a whole block.
    let d = _mm256_set1_ps(unsafe { half(p) });
    let m = _mm256_set1_ps(unsafe { half(p.add(2)) });
    let (lo, hi) = unsafe { nibbles(p.add(4)) };
    let ((a, b), (c, e)) = (widen(lo, false), widen(hi, false));
    [a, b, c, e].map(|w| _mm256_add_ps(_mm256_mul_ps(w, d), m))
}

/// `Σ w·x` over `nb` blocks of `$bytes` bytes decoded by `$decode`, four accumulators.
macro_rules! block_dot {
    ($vis:vis $name:ident, $bytes:expr, $decode:ident) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        #[inline]
        $vis unsafe fn $name(p: *const u8, x: *const f32, nb: usize) -> f32 {
            let mut a = [_mm256_setzero_ps(); 4];
            for b in 0..nb {
                // SAFETY: block b of `p` and values 32b..32b+32 of `x` are readable.
                unsafe {
                    let w = $decode(p.add(b * $bytes));
                    let xb = x.add(b * 32);
                    for j in 0..4 {
                        a[j] = _mm256_fmadd_ps(w[j], _mm256_loadu_ps(xb.add(8 * j)), a[j]);
                    }
                }
            }
            hsum(_mm256_add_ps(
                _mm256_add_ps(a[0], a[1]),
                _mm256_add_ps(a[2], a[3]),
            ))
        }
    };
}

block_dot!(dot_q8_0, fmt::Q8_0::BYTES, q8_0);
block_dot!(dot_q4_0, fmt::Q4_0::BYTES, q4_0);
block_dot!(dot_q4_1, fmt::Q4_1::BYTES, q4_1);
// The 5-bit types and IQ4_NL (AVX-512 CPUs run these too).
block_dot!(pub(super) dot_q5_0, fmt::Q5_0::BYTES, q5_0);
block_dot!(pub(super) dot_q5_1, fmt::Q5_1::BYTES, q5_1);
block_dot!(pub(super) dot_iq4_nl, fmt::IQ4_NL::BYTES, iq4_nl);

/// `Σ w·x` over `n` f32 weights.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn dot_f32(w: *const f32, x: *const f32, n: usize) -> f32 {
    let mut a = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY (every read): elements 0..n of `w` and `x` are readable.
    unsafe {
        while i + 32 <= n {
            for (j, acc) in a.iter_mut().enumerate() {
                let o = i + 8 * j;
                *acc = _mm256_fmadd_ps(_mm256_loadu_ps(w.add(o)), _mm256_loadu_ps(x.add(o)), *acc);
            }
            i += 32;
        }
        while i + 8 <= n {
            a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w.add(i)), _mm256_loadu_ps(x.add(i)), a[0]);
            i += 8;
        }
        let mut s = hsum(_mm256_add_ps(
            _mm256_add_ps(a[0], a[1]),
            _mm256_add_ps(a[2], a[3]),
        ));
        while i < n {
            s += *w.add(i) * *x.add(i);
            i += 1;
        }
        s
    }
}

/// `Σ w·x` over `n` f16 weights.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn dot_f16(w: *const u8, x: *const f32, n: usize) -> f32 {
    let mut a = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    // SAFETY (every read): weights 0..n (2 bytes each) and values 0..n are readable.
    unsafe {
        while i + 16 <= n {
            for (j, acc) in a.iter_mut().enumerate() {
                let o = i + 8 * j;
                let wv = _mm256_cvtph_ps(_mm_loadu_si128(w.add(2 * o).cast()));
                *acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x.add(o)), *acc);
            }
            i += 16;
        }
        let mut s = hsum(_mm256_add_ps(a[0], a[1]));
        while i < n {
            s += half(w.add(2 * i)) * *x.add(i);
            i += 1;
        }
        s
    }
}

/// `y[r] = Σ_c W[r, c]·x[c]` for every row of `data`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn matvec(ty: GgmlType, data: &[u8], cols: usize, x: &[f32], y: &mut [f32]) {
    let (per, bytes) = ty.block();
    let rb = cols / per * bytes;
    let (p, xp, nb) = (data.as_ptr(), x.as_ptr(), cols / 32);
    for (r, o) in y.iter_mut().enumerate() {
        // SAFETY: row r of `data` and all of `x` are in bounds (the caller's contract).
        *o = unsafe {
            let row = p.add(r * rb);
            if let Some(v) = super::avx2_k::dot_row(ty, &data[r * rb..(r + 1) * rb], x, cols) {
                v
            } else {
                match ty {
                    GgmlType::Q8_0 => dot_q8_0(row, xp, nb),
                    GgmlType::Q4_0 => dot_q4_0(row, xp, nb),
                    GgmlType::Q4_1 => dot_q4_1(row, xp, nb),
                    GgmlType::Q5_0 => dot_q5_0(row, xp, nb),
                    GgmlType::Q5_1 => dot_q5_1(row, xp, nb),
                    GgmlType::IQ4_NL => dot_iq4_nl(row, xp, nb),
                    GgmlType::F16 => dot_f16(row, xp, cols),
                    GgmlType::F32 => dot_f32(row.cast(), xp, cols),
                    _ => unreachable!("super-block types and BF16 are handled above"),
                }
            }
        };
    }
}

/// Dequantises `data` (whole blocks of `ty`) into `out`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dequantize(ty: GgmlType, data: &[u8], out: &mut [f32]) {
    // SAFETY: the caller's contract covers the super-block types and BF16.
    if unsafe { super::avx2_k::dequantize(ty, data, out) } {
        return;
    }
    let p = data.as_ptr();
    let (_, bytes) = ty.block();
    macro_rules! blocks {
        ($decode:ident) => {
            for (i, o) in out.chunks_exact_mut(32).enumerate() {
                // SAFETY: block i of `data` exists for every 32 outputs.
                unsafe {
                    let w = $decode(p.add(i * bytes));
                    for (j, v) in w.into_iter().enumerate() {
                        _mm256_storeu_ps(o.as_mut_ptr().add(8 * j), v);
                    }
                }
            }
        };
    }
    match ty {
        GgmlType::Q8_0 => blocks!(q8_0),
        GgmlType::Q4_0 => blocks!(q4_0),
        GgmlType::Q4_1 => blocks!(q4_1),
        GgmlType::Q5_0 => blocks!(q5_0),
        GgmlType::Q5_1 => blocks!(q5_1),
        GgmlType::IQ4_NL => blocks!(iq4_nl),
        GgmlType::F16 => {
            let mut chunks = out.chunks_exact_mut(8);
            let mut i = 0;
            for o in &mut chunks {
                // SAFETY: weights i..i+8 exist.
                unsafe {
                    let v = _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * i).cast()));
                    _mm256_storeu_ps(o.as_mut_ptr(), v);
                }
                i += 8;
            }
            for o in chunks.into_remainder() {
                // SAFETY: weight i exists.
                *o = unsafe { half(p.add(2 * i)) };
                i += 1;
            }
        }
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        _ => unreachable!("super-block types and BF16 are handled above"),
    }
}
