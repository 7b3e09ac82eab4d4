//! One decode step's attention over keys and values stored in IEEE half precision (an f16 KV
//! cache, llama.cpp's default): scores `s[j] = scale·q·k_j` and output `o = Σ_j p_j·v_j`, the
//! f16 rows widened to f32 in registers (F16C `vcvtph2ps`), so a step streams half the bytes
//! of an f32 cache. Query, scores, softmax and output stay f32, and the AVX2 bodies accumulate
//! in the order of the f32 kernels' AVX2 bodies ([`super::attention_decode`]): the widening is
//! exact, so they compute bit for bit what an f32 cache holding the same f16-rounded values
//! would (tested).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use half::f16;
use rayon::prelude::*;

use super::attention::{Dims, HeadAt, HeadLayout, Heads, HeadsMut, Out};
use super::simd::{self, Isa};

/// `O = softmax(q·Kᵀ·scale)·V` for one new query per head (`dims.t == 1`) over the
/// `past + 1` f16 rows of `k` and `v` (both laid out by `kv`, `H_kv` heads). `scores` holds at
/// least `B·H·(past + 1)` floats. Heads run in parallel; results do not depend on the thread
/// count.
pub fn decode(
    o: HeadsMut,
    scores: &mut [f32],
    q: Heads,
    (k, v, kv): (&[f16], &[f16], HeadLayout),
    dims: super::attention_cached::CachedDims,
    scale: f32,
) {
    let super::attention_cached::CachedDims {
        b,
        h,
        kv_h,
        t,
        past,
        d,
    } = dims;
    assert!(t == 1, "f16 decode attention takes one query per head");
    assert!(
        kv_h > 0 && h.is_multiple_of(kv_h),
        "attention: {h} query heads over {kv_h} key/value heads"
    );
    let n = past + 1;
    let kvd = Dims {
        b,
        h: kv_h,
        t: n,
        d,
    };
    assert!(
        q.x.len() >= q.layout.extent(Dims { b, h, t, d })
            && k.len() >= kv.extent(kvd)
            && v.len() >= kv.extent(kvd),
        "attention: input too short"
    );
    if b * h == 0 {
        return;
    }
    let group = h / kv_h;
    let o = Out::new(o, Dims { b, h, t, d });
    scores[..b * h * n]
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(bh, s)| {
            let at = HeadAt {
                b: bh / h,
                h: bh % h,
                kv: bh % h / group,
            };
            let qrow = &q.x[q.layout.at(at.b, at.h)..][..d];
            let (k0, v0) = (kv.at(at.b, at.kv), kv.at(at.b, at.kv));
            scores_f16(s, qrow, &k[k0..], kv.row, scale);
            let mx = simd::max(s);
            let sum = simd::exp_shifted_sum(s, mx);
            simd::scale(s, 1.0 / sum);
            // SAFETY: this task owns head (at.b, at.h) of `o`, whose first row holds `d`
            // floats (the extent check of `Out::new`).
            let out = unsafe { std::slice::from_raw_parts_mut(o.head_ptr(at.b, at.h), d) };
            weighted_sum_f16(out, s, &v[v0..], kv.row);
        });
}

/// `s[j] = scale · q·k_j`, f16 key row `j` at `k[j·ld..][..q.len()]`.
pub fn scores_f16(s: &mut [f32], q: &[f32], k: &[f16], ld: usize, scale: f32) {
    let (d, n) = (q.len(), s.len());
    assert!(
        n == 0 || (ld >= d && k.len() >= (n - 1) * ld + d),
        "attention scores: keys too short"
    );
    match simd::isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa` reports AVX2 only with FMA and F16C; bounds asserted above.
        Isa::Avx2 | Isa::Avx512 if d.is_multiple_of(8) => unsafe {
            scores_avx2(s, q, k, ld, scale)
        },
        _ => {
            for (j, sj) in s.iter_mut().enumerate() {
                let row = &k[j * ld..j * ld + d];
                *sj = q.iter().zip(row).map(|(a, b)| a * b.to_f32()).sum::<f32>() * scale;
            }
        }
    }
}

/// `out = Σ_j p[j]·v_j`, f16 value row `j` at `v[j·ld..][..out.len()]`.
pub fn weighted_sum_f16(out: &mut [f32], p: &[f32], v: &[f16], ld: usize) {
    let (d, n) = (out.len(), p.len());
    assert!(
        n == 0 || (ld >= d && v.len() >= (n - 1) * ld + d),
        "attention output: values too short"
    );
    match simd::isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Isa::Avx2 | Isa::Avx512 if d.is_multiple_of(8) => unsafe { weighted_avx2(out, p, v, ld) },
        _ => {
            out.fill(0.0);
            for (j, &pj) in p.iter().enumerate() {
                for (o, x) in out.iter_mut().zip(&v[j * ld..j * ld + d]) {
                    *o += pj * x.to_f32();
                }
            }
        }
    }
}

/// Eight f16 values at `p` widened to f32.
///
/// # Safety
/// `p..p+8` must be readable; the CPU must have F16C.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load8(p: *const f16) -> __m256 {
    // SAFETY: the caller guarantees 8 readable halves (16 bytes).
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
}

// The AVX2 bodies serve the AVX-512 machines too: the widening, not the FMA width, bounds a
// step that streams f16 rows (measured on the AVX2 machine only; see docs/BENCHMARKS.md).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_avx2(s: &mut [f32], q: &[f32], k: &[f16], ld: usize, scale: f32) {
    let d = q.len();
    let (qp, kp) = (q.as_ptr(), k.as_ptr());
    for (j, sj) in s.iter_mut().enumerate() {
        let (mut a, mut b) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut c = 0;
        // SAFETY (all loads): elements 0..d of `q` and of key row j are in bounds.
        unsafe {
            let kr = kp.add(j * ld);
            while c + 16 <= d {
                a = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(c)), load8(kr.add(c)), a);
                b = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(c + 8)), load8(kr.add(c + 8)), b);
                c += 16;
            }
            if c < d {
                a = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(c)), load8(kr.add(c)), a);
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
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn weighted_avx2(out: &mut [f32], p: &[f32], v: &[f16], ld: usize) {
    let vp = v.as_ptr();
    for (c0, oc) in (0..out.len()).step_by(BLOCK).zip(out.chunks_mut(BLOCK)) {
        let regs = oc.len() / 8;
        let mut acc = [_mm256_setzero_ps(); 8];
        for (j, &pj) in p.iter().enumerate() {
            let w = _mm256_set1_ps(pj);
            for (r, a) in acc.iter_mut().enumerate().take(regs) {
                // SAFETY: columns c0..c0+8·regs of value row j are in bounds.
                let x = unsafe { load8(vp.add(j * ld + c0 + 8 * r)) };
                *a = _mm256_fmadd_ps(w, x, *a);
            }
        }
        for (r, a) in acc.iter().enumerate().take(regs) {
            // SAFETY: `oc` holds 8·regs floats.
            unsafe { _mm256_storeu_ps(oc.as_mut_ptr().add(8 * r), *a) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::attention_decode;

    /// On f16-representable data the f16 kernels equal the f32 kernels bit for bit, at every
    /// instruction-set level this CPU runs (the widening is exact, the order the same as the
    /// f32 AVX2 body).
    #[test]
    fn f16_kernels_equal_f32_kernels_on_the_same_values() {
        let (n, d, ld) = (37, 64, 192);
        let mut r = crate::init::rng::seeded(7);
        let mut draw = |len| -> Vec<f16> {
            (0..len)
                .map(|_| f16::from_f32(rand::Rng::random_range(&mut r, -2.0f32..2.0)))
                .collect()
        };
        let (k16, v16) = (draw(n * ld), draw(n * ld));
        let q: Vec<f32> = draw(d).iter().map(|x| x.to_f32()).collect();
        let (k32, v32): (Vec<f32>, Vec<f32>) = (
            k16.iter().map(|x| x.to_f32()).collect(),
            v16.iter().map(|x| x.to_f32()).collect(),
        );
        for isa in [Isa::Baseline, Isa::Avx2] {
            if !simd::available().contains(&isa) {
                continue;
            }
            simd::with_isa(isa, || {
                let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
                scores_f16(&mut a, &q, &k16[ld - d..], ld, 0.125);
                attention_decode::scores(&mut b, &q, &k32[ld - d..], ld, 0.125);
                if isa == Isa::Avx2 {
                    assert_eq!(a, b, "{isa:?} scores");
                } else {
                    for (x, y) in a.iter().zip(&b) {
                        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{x} vs {y}");
                    }
                }
                let p: Vec<f32> = a.iter().map(|x| (x * 0.1).exp()).collect();
                let (mut oa, mut ob) = (vec![0.0; d], vec![0.0; d]);
                weighted_sum_f16(&mut oa, &p, &v16, ld);
                attention_decode::weighted_sum(&mut ob, &p, &v32, ld);
                if isa == Isa::Avx2 {
                    assert_eq!(oa, ob, "{isa:?} output");
                } else {
                    for (x, y) in oa.iter().zip(&ob) {
                        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{x} vs {y}");
                    }
                }
            });
        }
    }
}
