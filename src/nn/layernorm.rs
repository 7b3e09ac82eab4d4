//! LayerNorm over the last dimension: `y = (x - μ)·rstd·γ + β`, `rstd = 1/sqrt(σ² + ε)`
//! with the biased variance, as `torch.nn.LayerNorm` (ε = 1e-5).

/// PyTorch's default epsilon.
pub const EPS: f32 = 1e-5;

/// Forward over `N` rows of width `C`; saves each row's mean and rstd for the backward.
pub fn forward(
    y: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
    x: &[f32],
    g: &[f32],
    b: &[f32],
    c: usize,
) {
    let rows = y.chunks_exact_mut(c).zip(x.chunks_exact(c));
    for (((yr, xr), m), r) in rows.zip(mean.iter_mut()).zip(rstd.iter_mut()) {
        let mu = xr.iter().sum::<f32>() / c as f32;
        let var = xr.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / c as f32;
        let rs = 1.0 / (var + EPS).sqrt();
        for (((o, xv), gv), bv) in yr.iter_mut().zip(xr).zip(g).zip(b) {
            *o = (xv - mu) * rs * gv + bv;
        }
        *m = mu;
        *r = rs;
    }
}

/// Backward: `dx (+)= rstd·(dn - mean(dn) - n·mean(dn·n))` with `n` the normalised row and
/// `dn = dy·γ`; `dγ += Σ dy·n`, `dβ += Σ dy`. `accumulate` chooses `+=` or `=` for `dx`.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    dx: &mut [f32],
    dg: &mut [f32],
    db: &mut [f32],
    dy: &[f32],
    x: &[f32],
    mean: &[f32],
    rstd: &[f32],
    g: &[f32],
    c: usize,
    accumulate: bool,
) {
    let rows = dx
        .chunks_exact_mut(c)
        .zip(dy.chunks_exact(c))
        .zip(x.chunks_exact(c));
    for (((dxr, dyr), xr), (&mu, &rs)) in rows.zip(mean.iter().zip(rstd)) {
        let mut sum_dn = 0.0f32;
        let mut sum_dn_n = 0.0f32;
        for ((dyv, xv), gv) in dyr.iter().zip(xr).zip(g) {
            let n = (xv - mu) * rs;
            let dn = dyv * gv;
            sum_dn += dn;
            sum_dn_n += dn * n;
        }
        let m_dn = sum_dn / c as f32;
        let m_dn_n = sum_dn_n / c as f32;
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
            let v = rs * (dyv * gv - m_dn - n * m_dn_n);
            if accumulate {
                *dxv += v;
            } else {
                *dxv = v;
            }
        }
    }
}
