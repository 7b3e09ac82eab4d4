//! Causal softmax attention over heads laid out `(B, H, T, D)`, one rayon task per `(b, h)`.
//!
//! Forward: `S = Q·Kᵀ·scale`, `P = softmax(S + causal mask)` (saved), `O = P·V`.
//! Backward: `dP = dO·Vᵀ`, `dV = Pᵀ·dO`, `dS = P ⊙ (dP - rowsum(P ⊙ dP))·scale`,
//! `dQ = dS·K`, `dK = dSᵀ·Q`.

use super::dropout;
use super::matmul::{Trans, matmul};
use rayon::prelude::*;

/// `(B, T, H·D)` → `(B, H, T, D)`.
pub fn split_heads(out: &mut [f32], x: &[f32], t: usize, h: usize, d: usize) {
    out.par_chunks_mut(t * d).enumerate().for_each(|(bh, o)| {
        let (bi, hi) = (bh / h, bh % h);
        for ti in 0..t {
            let src = &x[(bi * t + ti) * h * d + hi * d..][..d];
            o[ti * d..(ti + 1) * d].copy_from_slice(src);
        }
    });
}

/// `(B, H, T, D)` → `(B, T, H·D)`.
pub fn merge_heads(out: &mut [f32], x: &[f32], t: usize, h: usize, d: usize) {
    out.par_chunks_mut(h * d).enumerate().for_each(|(bt, o)| {
        let (bi, ti) = (bt / t, bt % t);
        for hi in 0..h {
            let src = &x[((bi * h + hi) * t + ti) * d..][..d];
            o[hi * d..(hi + 1) * d].copy_from_slice(src);
        }
    });
}

/// Dropout on the attention probabilities: `P_drop = P ⊙ mask`, masks from
/// `dropout::mask_at(base, bh·T² + i, p)`; `att_drop (B, H, T, T)` keeps `P_drop`.
pub struct ProbDropout<'a> {
    /// Dropped probabilities, written by the forward, read by the backward.
    pub att_drop: &'a mut [f32],
    /// Drop probability.
    pub p: f32,
    /// Mask stream (`dropout::site_base`).
    pub base: u64,
}

/// Forward for all `(b, h)`: fills `att (B, H, T, T)` with the probabilities and `o (B, H, T, D)`
/// (`O = P·V`, or `O = P_drop·V` with dropout).
#[allow(clippy::too_many_arguments)]
pub fn forward(
    o: &mut [f32],
    att: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    t: usize,
    d: usize,
    scale: f32,
    drop: Option<ProbDropout>,
) {
    let (td, tt) = (t * d, t * t);
    let (dp, base) = drop.as_ref().map_or((0.0, 0), |x| (x.p, x.base));
    let body = |bh: usize, o: &mut [f32], p: &mut [f32], pdrop: Option<&mut [f32]>| {
        let (q, k, v) = (
            &q[bh * td..][..td],
            &k[bh * td..][..td],
            &v[bh * td..][..td],
        );
        matmul(p, q, Trans::No, k, Trans::Yes, t, d, t, false, 1);
        for (i, row) in p.chunks_exact_mut(t).enumerate() {
            let (live, masked) = row.split_at_mut(i + 1);
            let mut mx = f32::NEG_INFINITY;
            for s in live.iter_mut() {
                *s *= scale;
                mx = mx.max(*s);
            }
            let mut sum = 0.0;
            for s in live.iter_mut() {
                *s = (*s - mx).exp();
                sum += *s;
            }
            let inv = 1.0 / sum;
            live.iter_mut().for_each(|s| *s *= inv);
            masked.iter_mut().for_each(|s| *s = 0.0);
        }
        match pdrop {
            Some(pd) => {
                for (i, (x, &pv)) in pd.iter_mut().zip(p.iter()).enumerate() {
                    *x = pv * dropout::mask_at(base, bh * tt + i, dp);
                }
                matmul(o, pd, Trans::No, v, Trans::No, t, t, d, false, 1);
            }
            None => matmul(o, p, Trans::No, v, Trans::No, t, t, d, false, 1),
        }
    };
    let heads = o.par_chunks_mut(td).zip(att.par_chunks_mut(tt));
    match drop {
        Some(x) => heads
            .zip(x.att_drop.par_chunks_mut(tt))
            .enumerate()
            .for_each(|(bh, ((o, p), pd))| body(bh, o, p, Some(pd))),
        None => heads
            .enumerate()
            .for_each(|(bh, (o, p))| body(bh, o, p, None)),
    }
}

/// Backward for all `(b, h)`; overwrites `dq, dk, dv`; `dp (B, H, T, T)` is scratch. With
/// dropout (`drop = Some((att_drop, p, base))`): `dV = P_dropᵀ·dO` and `dP = (dO·Vᵀ) ⊙ mask`.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    dq: &mut [f32],
    dk: &mut [f32],
    dv: &mut [f32],
    dp: &mut [f32],
    dout: &[f32],
    att: &[f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    t: usize,
    d: usize,
    scale: f32,
    drop: Option<(&[f32], f32, u64)>,
) {
    let (td, tt) = (t * d, t * t);
    dq.par_chunks_mut(td)
        .zip(dk.par_chunks_mut(td))
        .zip(dv.par_chunks_mut(td))
        .zip(dp.par_chunks_mut(tt))
        .enumerate()
        .for_each(|(bh, (((dq, dk), dv), ds))| {
            let (q, k, v) = (
                &q[bh * td..][..td],
                &k[bh * td..][..td],
                &v[bh * td..][..td],
            );
            let (p, dout) = (&att[bh * tt..][..tt], &dout[bh * td..][..td]);
            matmul(ds, dout, Trans::No, v, Trans::Yes, t, d, t, false, 1);
            match drop {
                Some((pd, prob, base)) => {
                    matmul(
                        dv,
                        &pd[bh * tt..][..tt],
                        Trans::Yes,
                        dout,
                        Trans::No,
                        t,
                        t,
                        d,
                        false,
                        1,
                    );
                    for (i, x) in ds.iter_mut().enumerate() {
                        *x *= dropout::mask_at(base, bh * tt + i, prob);
                    }
                }
                None => matmul(dv, p, Trans::Yes, dout, Trans::No, t, t, d, false, 1),
            }
            for (i, (dr, pr)) in ds.chunks_exact_mut(t).zip(p.chunks_exact(t)).enumerate() {
                let dot: f32 = dr[..=i].iter().zip(&pr[..=i]).map(|(a, b)| a * b).sum();
                for (dv, pv) in dr[..=i].iter_mut().zip(&pr[..=i]) {
                    *dv = pv * (*dv - dot) * scale;
                }
                dr[i + 1..].iter_mut().for_each(|x| *x = 0.0);
            }
            matmul(dq, ds, Trans::No, k, Trans::No, t, t, d, false, 1);
            matmul(dk, ds, Trans::Yes, q, Trans::No, t, t, d, false, 1);
        });
}
