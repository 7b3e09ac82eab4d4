//! AVX-512 bodies of the quantised kernels: a 32-weight block is two registers of 16 f32.
//!
//! Callers guarantee the CPU features (by [`crate::nn::simd::isa`]) and the shapes: `data`
//! holds `y.len()` rows of `cols` weights of `ty`, and `x` holds `cols` values.

use std::arch::x86_64::*;

use crate::io::gguf::GgmlType;
use crate::io::gguf::blocks::{self as fmt, BlockFormat};

/// The f16 at `p` as f32.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn half(p: *const u8) -> f32 {
    // SAFETY: the caller points `p` at two readable bytes.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// Q8_0 block at `p` (34 bytes): `d·q`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn q8_0(p: *const u8) -> (__m512, __m512) {
    // SAFETY (all loads below): the caller points `p` at a whole block.
    let d = _mm512_set1_ps(unsafe { half(p) });
    let q0 = _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(p.add(2).cast()) });
    let q1 = _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(p.add(18).cast()) });
    (
        _mm512_mul_ps(_mm512_cvtepi32_ps(q0), d),
        _mm512_mul_ps(_mm512_cvtepi32_ps(q1), d),
    )
}

/// Q4_0 block at `p` (18 bytes): `d·(q − 8)`; low nibbles are weights 0..16.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn q4_0(p: *const u8) -> (__m512, __m512) {
    // SAFETY (both loads): the caller points `p` at a whole block.
    let d = _mm512_set1_ps(unsafe { half(p) });
    let q = _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(p.add(2).cast()) });
    let eight = _mm512_set1_epi32(8);
    let lo = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(15)), eight);
    let hi = _mm512_sub_epi32(_mm512_srli_epi32::<4>(q), eight);
    (
        _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d),
        _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d),
    )
}

/// Q4_1 block at `p` (20 bytes): `d·q + m` (multiply, then add: not fused).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn q4_1(p: *const u8) -> (__m512, __m512) {
    // SAFETY (all loads): the caller points `p` at a whole block.
    let d = _mm512_set1_ps(unsafe { half(p) });
    let m = _mm512_set1_ps(unsafe { half(p.add(2)) });
    let q = _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(p.add(4).cast()) });
    let lo = _mm512_and_si512(q, _mm512_set1_epi32(15));
    let hi = _mm512_srli_epi32::<4>(q);
    (
        _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d), m),
        _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(hi), d), m),
    )
}

/// `Σ w·x` over `nb` blocks of `$bytes` bytes decoded by `$decode`: two blocks per step into
/// four accumulators, so the multiply-adds do not wait on each other.
macro_rules! block_dot {
    ($name:ident, $bytes:expr, $decode:ident) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
        #[inline]
        unsafe fn $name(p: *const u8, x: *const f32, nb: usize) -> f32 {
            let mut a = [_mm512_setzero_ps(); 4];
            let mut b = 0;
            // SAFETY (every pointer below): blocks 0..nb of `p` and values 0..32·nb of `x`
            // are readable (the caller's contract).
            while b + 2 <= nb {
                let (w0, w1) = unsafe { $decode(p.add(b * $bytes)) };
                let (w2, w3) = unsafe { $decode(p.add((b + 1) * $bytes)) };
                let xb = unsafe { x.add(b * 32) };
                a[0] = _mm512_fmadd_ps(w0, unsafe { _mm512_loadu_ps(xb) }, a[0]);
                a[1] = _mm512_fmadd_ps(w1, unsafe { _mm512_loadu_ps(xb.add(16)) }, a[1]);
                a[2] = _mm512_fmadd_ps(w2, unsafe { _mm512_loadu_ps(xb.add(32)) }, a[2]);
                a[3] = _mm512_fmadd_ps(w3, unsafe { _mm512_loadu_ps(xb.add(48)) }, a[3]);
                b += 2;
            }
            if b < nb {
                let (w0, w1) = unsafe { $decode(p.add(b * $bytes)) };
                let xb = unsafe { x.add(b * 32) };
                a[0] = _mm512_fmadd_ps(w0, unsafe { _mm512_loadu_ps(xb) }, a[0]);
                a[1] = _mm512_fmadd_ps(w1, unsafe { _mm512_loadu_ps(xb.add(16)) }, a[1]);
            }
            let s = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
            _mm512_reduce_add_ps(s)
        }
    };
}

block_dot!(dot_q8_0, fmt::Q8_0::BYTES, q8_0);
block_dot!(dot_q4_0, fmt::Q4_0::BYTES, q4_0);
block_dot!(dot_q4_1, fmt::Q4_1::BYTES, q4_1);

/// `Σ w·x` over `n` f32 weights.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn dot_f32(w: *const f32, x: *const f32, n: usize) -> f32 {
    let mut a = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY (every load): elements 0..n of `w` and `x` are readable; the tail load is masked.
    unsafe {
        while i + 64 <= n {
            for (j, acc) in a.iter_mut().enumerate() {
                let o = i + 16 * j;
                *acc = _mm512_fmadd_ps(_mm512_loadu_ps(w.add(o)), _mm512_loadu_ps(x.add(o)), *acc);
            }
            i += 64;
        }
        while i + 16 <= n {
            a[0] = _mm512_fmadd_ps(_mm512_loadu_ps(w.add(i)), _mm512_loadu_ps(x.add(i)), a[0]);
            i += 16;
        }
        if i < n {
            let k: __mmask16 = (1u16 << (n - i)) - 1;
            let (wv, xv) = (
                _mm512_maskz_loadu_ps(k, w.add(i)),
                _mm512_maskz_loadu_ps(k, x.add(i)),
            );
            a[1] = _mm512_fmadd_ps(wv, xv, a[1]);
        }
    }
    let s = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
    _mm512_reduce_add_ps(s)
}

/// `Σ w·x` over `n` f16 weights.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn dot_f16(w: *const u8, x: *const f32, n: usize) -> f32 {
    let mut a = [_mm512_setzero_ps(); 2];
    let mut i = 0;
    // SAFETY (every load): weights 0..n (2 bytes each) and values 0..n are readable.
    unsafe {
        while i + 32 <= n {
            for (j, acc) in a.iter_mut().enumerate() {
                let o = i + 16 * j;
                let wv = _mm512_cvtph_ps(_mm256_loadu_si256(w.add(2 * o).cast()));
                *acc = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x.add(o)), *acc);
            }
            i += 32;
        }
        let mut s = _mm512_reduce_add_ps(_mm512_add_ps(a[0], a[1]));
        while i < n {
            s += half(w.add(2 * i)) * *x.add(i);
            i += 1;
        }
        s
    }
}

/// `y[r] = Σ_c W[r, c]·x[c]` for every row of `data`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
pub(super) unsafe fn matvec(ty: GgmlType, data: &[u8], cols: usize, x: &[f32], y: &mut [f32]) {
    let (per, bytes) = ty.block();
    let rb = cols / per * bytes;
    let (p, xp, nb) = (data.as_ptr(), x.as_ptr(), cols / 32);
    for (r, o) in y.iter_mut().enumerate() {
        // SAFETY: row r of `data` and all of `x` are in bounds (the caller's contract).
        *o = unsafe {
            let row = p.add(r * rb);
            // The super-block types and BF16 run the AVX2 bodies (AVX-512 CPUs have AVX2).
            if let Some(v) = super::avx2_k::dot_row(ty, &data[r * rb..(r + 1) * rb], x, cols) {
                v
            } else {
                match ty {
                    GgmlType::Q8_0 => dot_q8_0(row, xp, nb),
                    GgmlType::Q4_0 => dot_q4_0(row, xp, nb),
                    GgmlType::Q4_1 => dot_q4_1(row, xp, nb),
                    // The 5-bit types and IQ4_NL run their AVX2 bodies.
                    GgmlType::Q5_0 => super::avx2::dot_q5_0(row, xp, nb),
                    GgmlType::Q5_1 => super::avx2::dot_q5_1(row, xp, nb),
                    GgmlType::IQ4_NL => super::avx2::dot_iq4_nl(row, xp, nb),
                    GgmlType::F16 => dot_f16(row, xp, cols),
                    GgmlType::F32 => dot_f32(row.cast(), xp, cols),
                    _ => unreachable!("super-block types and BF16 are handled above"),
                }
            }
        };
    }
}

/// Dequantises `data` (whole blocks of `ty`) into `out`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
pub(super) unsafe fn dequantize(ty: GgmlType, data: &[u8], out: &mut [f32]) {
    // SAFETY: the caller's contract covers the super-block types and BF16 (AVX2 bodies).
    if unsafe { super::avx2_k::dequantize(ty, data, out) } {
        return;
    }
    if matches!(ty, GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::IQ4_NL) {
        // SAFETY: as above (the 5-bit types and IQ4_NL run their AVX2 bodies).
        unsafe { super::avx2::dequantize(ty, data, out) };
        return;
    }
    let p = data.as_ptr();
    let (_, bytes) = ty.block();
    macro_rules! blocks {
        ($decode:ident) => {
            for (i, o) in out.chunks_exact_mut(32).enumerate() {
                // SAFETY: block i of `data` exists for every 32 outputs.
                unsafe {
                    let (w0, w1) = $decode(p.add(i * bytes));
                    _mm512_storeu_ps(o.as_mut_ptr(), w0);
                    _mm512_storeu_ps(o.as_mut_ptr().add(16), w1);
                }
            }
        };
    }
    match ty {
        GgmlType::Q8_0 => blocks!(q8_0),
        GgmlType::Q4_0 => blocks!(q4_0),
        GgmlType::Q4_1 => blocks!(q4_1),
        GgmlType::F16 => {
            let mut chunks = out.chunks_exact_mut(16);
            let mut i = 0;
            for o in &mut chunks {
                // SAFETY: weights i..i+16 exist.
                unsafe {
                    let v = _mm512_cvtph_ps(_mm256_loadu_si256(p.add(2 * i).cast()));
                    _mm512_storeu_ps(o.as_mut_ptr(), v);
                }
                i += 16;
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
        _ => unreachable!("super-block, 5-bit types, IQ4_NL and BF16 are handled above"),
    }
}
