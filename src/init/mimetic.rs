//! Mimetic initialisation of a self-attention layer (Trockman and Kolter 2023).
//!
//! Pretrained attention has `W_Q W_Kᵀ ≈ α₁Z₁ + β₁I` per head and `W_V W_O ≈ α₂Z₂ − β₂I`, with
//! `Z₁ ~ N(0, I/k)` (`k` the head dimension) and `Z₂ ~ N(0, I/d)`. We draw those targets and
//! factor them by SVD, `M = U Σ Vᵀ`: `W_Q = U_k Σ_k^{1/2}`, `W_K = V_k Σ_k^{1/2}` (the best rank-`k`
//! factorisation of each head's target, Eckart–Young) and `W_V = U Σ^{1/2}`, `W_O = Σ^{1/2} Vᵀ`
//! (exact, full rank). Shapes: `W_Q, W_K, W_V` are `d x d` (heads side by side, `h·k = d`),
//! `W_O` is `d x d`; products are `x W`, as in `nn.Linear` weights transposed.

use faer::Mat;

use super::InitError;
use super::rng::{fill_standard_normal, seeded};

/// The paper's constants (its ViT defaults), all overridable.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct MimeticParams {
    /// Noise scale of the query-key target.
    pub alpha1: f64,
    /// Identity weight of the query-key target.
    pub beta1: f64,
    /// Noise scale of the value-output target.
    pub alpha2: f64,
    /// Identity weight (subtracted) of the value-output target.
    pub beta2: f64,
}

impl Default for MimeticParams {
    fn default() -> Self {
        MimeticParams {
            alpha1: 0.7,
            beta1: 0.7,
            alpha2: 0.4,
            beta2: 0.4,
        }
    }
}

/// The four weights and how close their products are to the targets.
#[derive(Clone, Debug)]
pub struct Mimetic {
    /// `d x d` row-major query weight (head `i` in columns `i·k..(i+1)·k`).
    pub wq: Vec<f64>,
    /// `d x d` row-major key weight.
    pub wk: Vec<f64>,
    /// `d x d` row-major value weight.
    pub wv: Vec<f64>,
    /// `d x d` row-major output weight.
    pub wo: Vec<f64>,
    /// Largest over heads of `‖W_Q^i W_K^iᵀ − (α₁Z₁ⁱ + β₁I)‖_F / ‖α₁Z₁ⁱ + β₁I‖_F`.
    pub qk_rel_error: f64,
    /// `‖W_V W_O − (α₂Z₂ − β₂I)‖_F / ‖α₂Z₂ − β₂I‖_F`.
    pub vo_rel_error: f64,
}

fn svd_factor(m: &Mat<f64>, rank: usize) -> Result<(Mat<f64>, Mat<f64>), InitError> {
    let s = m
        .thin_svd()
        .map_err(|e| InitError::Numerical(format!("mimetic SVD: {e:?}")))?;
    let d = m.nrows();
    let (u, v, sv) = (s.U(), s.V(), s.S().column_vector());
    let left = Mat::<f64>::from_fn(d, rank, |i, j| u[(i, j)] * sv[j].sqrt());
    let right = Mat::<f64>::from_fn(d, rank, |i, j| v[(i, j)] * sv[j].sqrt());
    Ok((left, right))
}

fn rel_err(a: &Mat<f64>, target: &Mat<f64>) -> f64 {
    (a - target).norm_l2() / target.norm_l2()
}

/// Mimetic weights for model width `d` and `heads` heads (`heads` must divide `d`).
pub fn mimetic(d: usize, heads: usize, p: MimeticParams, seed: u64) -> Result<Mimetic, InitError> {
    if d == 0 || heads == 0 || !d.is_multiple_of(heads) {
        return Err(InitError::BadParam(format!(
            "mimetic needs heads ({heads}) >= 1 dividing the width ({d})"
        )));
    }
    // About a dozen d x d f64 matrices are alive at once (Z, the SVD's factors, W_Q..W_O).
    crate::io::memory::check_fits(
        crate::io::memory::bytes(&[d, d, 8, 12]),
        format_args!("mimetic initialisation of width {d}"),
    )?;
    let k = d / heads;
    let mut rng = seeded(seed);
    let mut z = vec![0.0; d * d];
    let (mut wq, mut wk) = (Mat::<f64>::zeros(d, d), Mat::<f64>::zeros(d, d));
    let mut qk_err: f64 = 0.0;
    for h in 0..heads {
        fill_standard_normal(&mut rng, &mut z);
        let sd = 1.0 / (k as f64).sqrt();
        let t = Mat::<f64>::from_fn(d, d, |i, j| {
            p.alpha1 * sd * z[i * d + j] + if i == j { p.beta1 } else { 0.0 }
        });
        let (l, r) = svd_factor(&t, k)?;
        qk_err = crate::stats::nan_max(qk_err, rel_err(&(&l * r.transpose()), &t));
        for i in 0..d {
            for j in 0..k {
                wq[(i, h * k + j)] = l[(i, j)];
                wk[(i, h * k + j)] = r[(i, j)];
            }
        }
    }
    fill_standard_normal(&mut rng, &mut z);
    let sd = 1.0 / (d as f64).sqrt();
    let t = Mat::<f64>::from_fn(d, d, |i, j| {
        p.alpha2 * sd * z[i * d + j] - if i == j { p.beta2 } else { 0.0 }
    });
    let (l, r) = svd_factor(&t, d)?;
    let wo = r.transpose().to_owned();
    let vo_err = rel_err(&(&l * &wo), &t);
    let flat = |m: &Mat<f64>| -> Vec<f64> {
        (0..d)
            .flat_map(|i| (0..d).map(move |j| (i, j)))
            .map(|(i, j)| m[(i, j)])
            .collect()
    };
    Ok(Mimetic {
        wq: flat(&wq),
        wk: flat(&wk),
        wv: flat(&l),
        wo: flat(&wo),
        qk_rel_error: qk_err,
        vo_rel_error: vo_err,
    })
}
