//! Pairwise-distance distortion of a projection against the Johnson-Lindenstrauss bound.
//!
//! JL (Dasgupta-Gupta form): for `n` points and `k >= 4 ln n / (ε²/2 - ε³/3)`, the map
//! `f(x) = sqrt(d/k) · xW` with `W` a random `d x k` projection keeps every squared distance
//! within `(1 ± ε)` with probability at least `1/n`. The rescale `sqrt(d/k)` is part of the
//! lemma: `xW` alone shrinks squared distances by `k/d` on average. We measure the rescaled
//! squared ratio `r = (d/k) ||(x_i - x_j)W||² / ||x_i - x_j||²` over all pairs and report the
//! worst `|r - 1|` beside the `ε` the lemma guarantees at `k = d_k`.

use super::{Matrix, TheoryError, mean_std};

/// Summary of pairwise distance distortion.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Distortion {
    /// Points used.
    pub points: usize,
    /// Pairs measured (pairs of identical points are skipped).
    pub pairs: usize,
    /// Mean of the unscaled ratio `||ΔW|| / ||Δ||` (a projection: about `sqrt(d_k/d_model)`).
    pub mean_unscaled: f64,
    /// Mean of the rescaled squared ratio `r` (about 1 for random directions).
    pub mean_scaled_sq: f64,
    /// Standard deviation of `r`.
    pub std_scaled_sq: f64,
    /// Worst `|r - 1|`: the distortion `ε` actually measured.
    pub max_distortion: f64,
    /// 95th percentile of `|r - 1|`.
    pub p95_distortion: f64,
    /// The `ε` JL guarantees for this many points at `k = d_k`; `None` when it guarantees
    /// nothing below 1 (`4 ln n / k >= 1/6`).
    pub jl_epsilon: Option<f64>,
    /// Every rescaled squared ratio `r`, pair order (for plots).
    #[serde(skip)]
    pub scaled_sq: Vec<f64>,
}

/// The `ε` in `(0, 1)` with `k = 4 ln n / (ε²/2 - ε³/3)`, or `None` when no `ε < 1` satisfies
/// it (the left side is increasing on `(0, 1)` and reaches `1/6` at `ε = 1`).
pub fn jl_epsilon(points: usize, k: usize) -> Option<f64> {
    if points < 2 || k == 0 {
        return None;
    }
    let need = 4.0 * (points as f64).ln() / k as f64;
    let g = |e: f64| e * e / 2.0 - e * e * e / 3.0;
    if need >= g(1.0) {
        return None;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if g(mid) < need {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(0.5 * (lo + hi))
}

/// Measures the distortion of all pairwise distances among the rows of `x` (`n x d_model`)
/// under `w` (`d_model x d_k`).
pub fn distance_distortion(x: &Matrix, w: &Matrix) -> Result<Distortion, TheoryError> {
    let proj = x.matmul(w)?;
    let scale = w.rows as f64 / w.cols as f64;
    let n = x.rows;
    let mut scaled_sq = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    let mut unscaled = Vec::with_capacity(scaled_sq.capacity());
    for i in 0..n {
        for j in 0..i {
            let dx = sq_dist(x.row(i), x.row(j));
            if dx == 0.0 {
                continue;
            }
            let r = sq_dist(proj.row(i), proj.row(j)) / dx;
            unscaled.push(r.sqrt());
            scaled_sq.push(scale * r);
        }
    }
    if scaled_sq.is_empty() {
        return Err(TheoryError::Shape(format!(
            "{n} points give no distinct pair"
        )));
    }
    let mut dev: Vec<f64> = scaled_sq.iter().map(|r| (r - 1.0).abs()).collect();
    dev.sort_by(f64::total_cmp);
    let p95 = dev[((dev.len() as f64 * 0.95).ceil() as usize).clamp(1, dev.len()) - 1];
    let (mean_scaled_sq, std_scaled_sq) = mean_std(&scaled_sq);
    Ok(Distortion {
        points: n,
        pairs: scaled_sq.len(),
        mean_unscaled: mean_std(&unscaled).0,
        mean_scaled_sq,
        std_scaled_sq,
        max_distortion: dev[dev.len() - 1],
        p95_distortion: p95,
        jl_epsilon: jl_epsilon(n, w.cols),
        scaled_sq,
    })
}

fn sq_dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}
