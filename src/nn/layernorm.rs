//! LayerNorm over the last dimension: `y = (x - μ)·rstd·γ + β`, `rstd = 1/sqrt(σ² + ε)`
//! with the biased variance, as `torch.nn.LayerNorm` (ε = 1e-5).
//!
//! Rows are split over rayon in fixed blocks of `ROWS` (64); the backward's `dγ, dβ` are summed
//! per block and the block sums added in order, so results do not depend on the thread count.

use super::simd::{self, LANES, dispatch};
use rayon::prelude::*;

/// PyTorch's default epsilon.
pub const EPS: f32 = 1e-5;

/// Rows per rayon task (and per partial `dγ, dβ` sum in the backward).
const ROWS: usize = 64;

/// Forward over `N` rows of width `C`; saves each row's mean and rstd for the backward.
/// `b: None` is a LayerNorm without bias (`F.layer_norm(x, (C,), γ, None)`).
pub fn forward(
    y: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
    x: &[f32],
    g: &[f32],
    b: Option<&[f32]>,
    c: usize,
) {
    // An empty `b` tells the kernel there is no bias.
    let b = b.unwrap_or(&[]);
    y.par_chunks_mut(ROWS * c)
        .zip(x.par_chunks(ROWS * c))
        .zip(mean.par_chunks_mut(ROWS).zip(rstd.par_chunks_mut(ROWS)))
        .for_each(|((y, x), (m, r))| forward_rows(y, m, r, x, g, b, c));
}

dispatch! {
    fn forward_rows(y: &mut [f32], mean: &mut [f32], rstd: &mut [f32], x: &[f32], g: &[f32], b: &[f32], c: usize) {
        let rows = y.chunks_exact_mut(c).zip(x.chunks_exact(c));
        for (((yr, xr), m), r) in rows.zip(mean.iter_mut()).zip(rstd.iter_mut()) {
            let mu = sum(xr) / c as f32;
            let mut acc = [0.0f32; LANES];
            let mut chunks = xr.chunks_exact(LANES);
            for ch in &mut chunks {
                for (a, v) in acc.iter_mut().zip(ch) {
                    *a += (v - mu) * (v - mu);
                }
            }
            let tail: f32 = chunks.remainder().iter().map(|v| (v - mu) * (v - mu)).sum();
            let var = (tail + acc.iter().sum::<f32>()) / c as f32;
            let rs = 1.0 / (var + EPS).sqrt();
            if b.is_empty() {
                for ((o, xv), gv) in yr.iter_mut().zip(xr).zip(g) {
                    *o = (xv - mu) * rs * gv;
                }
            } else {
                for (((o, xv), gv), bv) in yr.iter_mut().zip(xr).zip(g).zip(b) {
                    *o = (xv - mu) * rs * gv + bv;
                }
            }
            *m = mu;
            *r = rs;
        }
    }
}

/// Sum with [`LANES`] partial sums (inlined into the dispatched kernels).
#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for ch in &mut chunks {
        for (a, v) in acc.iter_mut().zip(ch) {
            *a += v;
        }
    }
    chunks.remainder().iter().sum::<f32>() + acc.iter().sum::<f32>()
}

/// Backward: accumulates `dγ` and `dβ` (`db: None` for a LayerNorm without bias); writes
/// (or with `accumulate`, adds) `dx`.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    dx: &mut [f32],
    dg: &mut [f32],
    mut db: Option<&mut [f32]>,
    dy: &[f32],
    x: &[f32],
    mean: &[f32],
    rstd: &[f32],
    g: &[f32],
    c: usize,
    accumulate: bool,
) {
    let partial: Vec<Vec<f32>> = dx
        .par_chunks_mut(ROWS * c)
        .zip(dy.par_chunks(ROWS * c).zip(x.par_chunks(ROWS * c)))
        .zip(mean.par_chunks(ROWS).zip(rstd.par_chunks(ROWS)))
        .map(|((dx, (dy, x)), (m, r))| {
            let mut dgb = vec![0.0f32; 2 * c];
            backward_rows(dx, &mut dgb, dy, x, m, r, g, c, accumulate);
            dgb
        })
        .collect();
    for p in &partial {
        simd::add_assign(dg, &p[..c]);
        if let Some(db) = db.as_deref_mut() {
            simd::add_assign(db, &p[c..]);
        }
    }
}

dispatch! {
    // dgb holds dγ then dβ of this block of rows.
    fn backward_rows(dx: &mut [f32], dgb: &mut [f32], dy: &[f32], x: &[f32], mean: &[f32], rstd: &[f32], g: &[f32], c: usize, accumulate: bool) {
        let (dg, db) = dgb.split_at_mut(c);
        let rows = dx.chunks_exact_mut(c).zip(dy.chunks_exact(c)).zip(x.chunks_exact(c));
        for (((dxr, dyr), xr), (&mu, &rs)) in rows.zip(mean.iter().zip(rstd)) {
            let mut s_dn = [0.0f32; LANES];
            let mut s_dnn = [0.0f32; LANES];
            let (mut t_dn, mut t_dnn) = (0.0f32, 0.0f32);
            let (cd, cx, cg) = (dyr.chunks_exact(LANES), xr.chunks_exact(LANES), g.chunks_exact(LANES));
            for ((dyv, xv), gv) in cd.remainder().iter().zip(cx.remainder()).zip(cg.remainder()) {
                let dn = dyv * gv;
                t_dn += dn;
                t_dnn += dn * (xv - mu) * rs;
            }
            for ((dyc, xc), gc) in cd.zip(cx).zip(cg) {
                for i in 0..LANES {
                    let dn = dyc[i] * gc[i];
                    s_dn[i] += dn;
                    s_dnn[i] += dn * (xc[i] - mu) * rs;
                }
            }
            let m_dn = (t_dn + s_dn.iter().sum::<f32>()) / c as f32;
            let m_dnn = (t_dnn + s_dnn.iter().sum::<f32>()) / c as f32;
            for (((((dxv, dyv), xv), gv), dgv), dbv) in dxr
                .iter_mut()
                .zip(dyr)
                .zip(xr)
                .zip(g)
                .zip(dg.iter_mut())
                .zip(db.iter_mut())
            {
                let n = (xv - mu) * rs;
                *dgv += dyv * n;
                *dbv += dyv;
                let v = rs * (dyv * gv - m_dn - n * m_dnn);
                *dxv = if accumulate { *dxv + v } else { v };
            }
        }
    }
}
