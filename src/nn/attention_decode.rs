//! The two products of one decode step's attention per head, written for the vector units:
//! scores `s[j] = scale·q·k_j` over the cached key rows, and the output `o = Σ_j p_j·v_j` over
//! the cached value rows (rows `ld` apart). AVX-512 and AVX2 bodies use intrinsics (a plain loop
//! leaves the per-key horizontal sum scalar and the output accumulators in memory); the
//! portable body is the plain loop. Chosen per call by [`simd::isa`].

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::simd::{self, Isa};

/// `s[j] = scale · q·k_j`, key row `j` at `k[j·ld..][..q.len()]`.
pub fn scores(s: &mut [f32], q: &[f32], k: &[f32], ld: usize, scale: f32) {
    let (d, n) = (q.len(), s.len());
    assert!(
        n == 0 || (ld >= d && k.len() >= (n - 1) * ld + d),
        "attention scores: keys too short"
    );
    match simd::isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa` reports AVX-512 only when the CPU has it; bounds asserted above.
        Isa::Avx512 if d.is_multiple_of(16) => unsafe { scores_avx512(s, q, k, ld, scale) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, for AVX2/FMA.
        Isa::Avx2 | Isa::Avx512 if d.is_multiple_of(8) => unsafe {
            scores_avx2(s, q, k, ld, scale)
        },
        _ => {
            for (j, sj) in s.iter_mut().enumerate() {
                *sj = simd::dot(q, &k[j * ld..j * ld + d]) * scale;
            }
        }
    }
}

/// `out = Σ_j p[j]·v_j`, value row `j` at `v[j·ld..][..out.len()]`.
pub fn weighted_sum(out: &mut [f32], p: &[f32], v: &[f32], ld: usize) {
    let (d, n) = (out.len(), p.len());
    assert!(
        n == 0 || (ld >= d && v.len() >= (n - 1) * ld + d),
        "attention output: values too short"
    );
    match simd::isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa` reports AVX-512 only when the CPU has it; bounds asserted above.
        Isa::Avx512 if d.is_multiple_of(16) => unsafe { weighted_avx512(out, p, v, ld) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, for AVX2/FMA.
        Isa::Avx2 | Isa::Avx512 if d.is_multiple_of(8) => unsafe { weighted_avx2(out, p, v, ld) },
        _ => {
            out.fill(0.0);
            for (j, &pj) in p.iter().enumerate() {
                for (o, &x) in out.iter_mut().zip(&v[j * ld..j * ld + d]) {
                    *o += pj * x;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn scores_avx512(s: &mut [f32], q: &[f32], k: &[f32], ld: usize, scale: f32) {
    let d = q.len();
    let (qp, kp) = (q.as_ptr(), k.as_ptr());
    for (j, sj) in s.iter_mut().enumerate() {
        let (mut a, mut b) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let mut c = 0;
        // SAFETY (all loads): elements 0..d of `q` and of key row j are in bounds.
        unsafe {
            let kr = kp.add(j * ld);
            while c + 32 <= d {
                a = _mm512_fmadd_ps(_mm512_loadu_ps(qp.add(c)), _mm512_loadu_ps(kr.add(c)), a);
                b = _mm512_fmadd_ps(
                    _mm512_loadu_ps(qp.add(c + 16)),
                    _mm512_loadu_ps(kr.add(c + 16)),
                    b,
                );
                c += 32;
            }
            if c < d {
                a = _mm512_fmadd_ps(_mm512_loadu_ps(qp.add(c)), _mm512_loadu_ps(kr.add(c)), a);
            }
        }
        *sj = _mm512_reduce_add_ps(_mm512_add_ps(a, b)) * scale;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scores_avx2(s: &mut [f32], q: &[f32], k: &[f32], ld: usize, scale: f32) {
    let d = q.len();
    let (qp, kp) = (q.as_ptr(), k.as_ptr());
    for (j, sj) in s.iter_mut().enumerate() {
        let (mut a, mut b) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut c = 0;
        // SAFETY (all loads): elements 0..d of `q` and of key row j are in bounds.
        unsafe {
            let kr = kp.add(j * ld);
            while c + 16 <= d {
                a = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(c)), _mm256_loadu_ps(kr.add(c)), a);
                b = _mm256_fmadd_ps(
                    _mm256_loadu_ps(qp.add(c + 8)),
                    _mm256_loadu_ps(kr.add(c + 8)),
                    b,
                );
                c += 16;
            }
            if c < d {
                a = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(c)), _mm256_loadu_ps(kr.add(c)), a);
            }
        }
        let v = _mm256_add_ps(a, b);
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_movehdup_ps(h));
        *sj = _mm_cvtss_f32(h) * scale;
    }
}

/// Output floats kept in registers per pass over the values.
#[cfg(target_arch = "x86_64")]
const BLOCK: usize = 64;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn weighted_avx512(out: &mut [f32], p: &[f32], v: &[f32], ld: usize) {
    let vp = v.as_ptr();
    for (c0, oc) in (0..out.len()).step_by(BLOCK).zip(out.chunks_mut(BLOCK)) {
        let regs = oc.len() / 16;
        // Two accumulator sets (even and odd keys) so consecutive FMAs do not wait.
        let mut acc = [[_mm512_setzero_ps(); 4]; 2];
        for (j, &pj) in p.iter().enumerate() {
            let w = _mm512_set1_ps(pj);
            let set = &mut acc[j & 1];
            for (r, a) in set.iter_mut().enumerate().take(regs) {
                // SAFETY: columns c0..c0+16·regs of value row j are in bounds.
                let x = unsafe { _mm512_loadu_ps(vp.add(j * ld + c0 + 16 * r)) };
                *a = _mm512_fmadd_ps(w, x, *a);
            }
        }
        for (r, (&even, &odd)) in acc[0].iter().zip(&acc[1]).enumerate().take(regs) {
            let sum = _mm512_add_ps(even, odd);
            // SAFETY: `oc` holds 16·regs floats.
            unsafe { _mm512_storeu_ps(oc.as_mut_ptr().add(16 * r), sum) };
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn weighted_avx2(out: &mut [f32], p: &[f32], v: &[f32], ld: usize) {
    let vp = v.as_ptr();
    for (c0, oc) in (0..out.len()).step_by(BLOCK).zip(out.chunks_mut(BLOCK)) {
        let regs = oc.len() / 8;
        let mut acc = [_mm256_setzero_ps(); 8];
        for (j, &pj) in p.iter().enumerate() {
            let w = _mm256_set1_ps(pj);
            for (r, a) in acc.iter_mut().enumerate().take(regs) {
                // SAFETY: columns c0..c0+8·regs of value row j are in bounds.
                let x = unsafe { _mm256_loadu_ps(vp.add(j * ld + c0 + 8 * r)) };
                *a = _mm256_fmadd_ps(w, x, *a);
            }
        }
        for (r, a) in acc.iter().enumerate().take(regs) {
            // SAFETY: `oc` holds 8·regs floats.
            unsafe { _mm256_storeu_ps(oc.as_mut_ptr().add(8 * r), *a) };
        }
    }
}
