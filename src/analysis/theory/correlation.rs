//! How well attention scores `q·k = (x W_Q)·(y W_K)` track the input similarity `x·y`.
//!
//! `q·k = x M yᵀ` with `M = W_Q W_Kᵀ` (`d_model x d_model`). For independent Gaussian `x, y`
//! the Pearson correlation of `x M yᵀ` with `x·y` is exactly
//! `tr(M) / sqrt(d_model · ||M||_F²)`: with tied `W_Q = W_K = W` (orthonormal columns) it is
//! `sqrt(d_k/d_model)`, and with independent random `W_Q`, `W_K` it is near 0 (the seed's
//! "routing by semantic similarity" does not hold). On real activations we measure it over
//! causal pairs (query row `i`, key row `j < i`).

use super::{Matrix, TheoryError, dot};

/// Correlation of attention scores with input dot products over causal pairs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct QkCorrelation {
    /// Pairs `(i, j)`, `j < i`, measured.
    pub pairs: usize,
    /// Pearson correlation of `q_i·k_j` with `x_i·x_j`.
    pub pearson: f64,
    /// What the same `W_Q`, `W_K` give for independent Gaussian inputs:
    /// `tr(W_Q W_Kᵀ) / sqrt(d_model · ||W_Q W_Kᵀ||_F²)`.
    pub gaussian_prediction: f64,
    /// The pairs as `(x·y, q·k)`, capped to a few thousand for plots.
    #[serde(skip)]
    pub sample: Vec<(f64, f64)>,
}

/// Most pairs kept for plots.
const SAMPLE_CAP: usize = 4000;

/// Pearson correlation of `(x_i W_Q)·(x_j W_K)` with `x_i·x_j` over all `j < i`, for `x`
/// (`n x d_model`) and `w_q`, `w_k` (`d_model x d_k`).
pub fn qk_correlation(
    x: &Matrix,
    w_q: &Matrix,
    w_k: &Matrix,
) -> Result<QkCorrelation, TheoryError> {
    if w_q.rows != w_k.rows || w_q.cols != w_k.cols {
        return Err(TheoryError::Shape(format!(
            "W_Q is {} x {} but W_K is {} x {}",
            w_q.rows, w_q.cols, w_k.rows, w_k.cols
        )));
    }
    let q = x.matmul(w_q)?;
    let k = x.matmul(w_k)?;
    let n = x.rows;
    let total = n * n.saturating_sub(1) / 2;
    if total < 2 {
        return Err(TheoryError::Shape(format!(
            "{n} rows give fewer than 2 pairs"
        )));
    }
    let stride = total.div_ceil(SAMPLE_CAP).max(1);
    let (mut sa, mut sb, mut saa, mut sbb, mut sab) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let mut sample = Vec::with_capacity(total.min(SAMPLE_CAP));
    let mut idx = 0usize;
    for i in 0..n {
        for j in 0..i {
            let a = dot(x.row(i), x.row(j));
            let b = dot(q.row(i), k.row(j));
            sa += a;
            sb += b;
            saa += a * a;
            sbb += b * b;
            sab += a * b;
            if idx.is_multiple_of(stride) {
                sample.push((a, b));
            }
            idx += 1;
        }
    }
    let m = total as f64;
    let cov = sab / m - (sa / m) * (sb / m);
    let va = saa / m - (sa / m).powi(2);
    let vb = sbb / m - (sb / m).powi(2);
    let pearson = if va > 0.0 && vb > 0.0 {
        cov / (va * vb).sqrt()
    } else {
        0.0
    };
    Ok(QkCorrelation {
        pairs: total,
        pearson,
        gaussian_prediction: gaussian_qk_correlation(w_q, w_k)?,
        sample,
    })
}

/// `tr(M) / sqrt(d · ||M||_F²)` for `M = W_Q W_Kᵀ`: the exact correlation of `x M yᵀ` with
/// `x·y` for independent standard Gaussian `x, y` in `R^d` (`E[xMyᵀ · x·y] = tr M`,
/// `Var(xMyᵀ) = ||M||_F²`, `Var(x·y) = d`).
pub fn gaussian_qk_correlation(w_q: &Matrix, w_k: &Matrix) -> Result<f64, TheoryError> {
    if w_q.rows != w_k.rows || w_q.cols != w_k.cols {
        return Err(TheoryError::Shape("W_Q and W_K differ in shape".into()));
    }
    // tr(W_Q W_Kᵀ) = Σ entries of W_Q ∘ W_K; ||W_Q W_Kᵀ||_F² = tr((W_QᵀW_Q)(W_KᵀW_K)).
    let trace = dot(&w_q.data, &w_k.data);
    let gq = w_q.transpose().matmul(w_q)?;
    let gk = w_k.transpose().matmul(w_k)?;
    let frob = dot(&gq.data, &gk.data);
    if frob <= 0.0 {
        return Ok(0.0);
    }
    Ok(trace / (w_q.rows as f64 * frob).sqrt())
}
