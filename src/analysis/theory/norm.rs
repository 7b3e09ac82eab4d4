//! How much a frozen projection shrinks vectors: `||xW|| / ||x||` against `sqrt(d_k/d_model)`.
//!
//! For `W` (`d_model x d_k`) with orthonormal columns, `||xW||² / ||x||²` is the squared cosine
//! between `x` and the column space of `W`. For a direction uniform on the sphere it follows
//! `Beta(d_k/2, (d_model - d_k)/2)`, with mean exactly `d_k/d_model`; it is 1 for every `x`
//! only when `d_k = d_model` (a rotation, the only true isometry).

use super::{Matrix, TheoryError, mean_std};

/// Summary of `||x_i W|| / ||x_i||` over the rows `x_i` of a matrix.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NormRatio {
    /// Rows measured (rows with `||x|| = 0` are skipped).
    pub count: usize,
    /// Mean of `||xW||² / ||x||²` (predicted `d_k / d_model` for random directions).
    pub mean_sq: f64,
    /// Mean of `||xW|| / ||x||`.
    pub mean: f64,
    /// Standard deviation of `||xW|| / ||x||`.
    pub std: f64,
    /// Smallest ratio.
    pub min: f64,
    /// Largest ratio.
    pub max: f64,
    /// `sqrt(d_k / d_model)`, the ratio a random direction has in mean square.
    pub predicted: f64,
    /// The seed's claim: 1 (an isometry).
    pub seed_claim: f64,
    /// Every measured ratio, in row order (for plots).
    #[serde(skip)]
    pub ratios: Vec<f64>,
}

/// Measures `||x_i W|| / ||x_i||` for every row of `x` (`n x d_model`) and `w` (`d_model x d_k`).
pub fn norm_ratio(x: &Matrix, w: &Matrix) -> Result<NormRatio, TheoryError> {
    let proj = x.matmul(w)?;
    let mut ratios = Vec::with_capacity(x.rows);
    for i in 0..x.rows {
        let nx = super::dot(x.row(i), x.row(i));
        if nx > 0.0 {
            ratios.push((super::dot(proj.row(i), proj.row(i)) / nx).sqrt());
        }
    }
    if ratios.is_empty() {
        return Err(TheoryError::Shape("every row has zero norm".into()));
    }
    let sq: Vec<f64> = ratios.iter().map(|r| r * r).collect();
    let (mean, std) = mean_std(&ratios);
    Ok(NormRatio {
        count: ratios.len(),
        mean_sq: mean_std(&sq).0,
        mean,
        std,
        min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
        max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        predicted: (w.cols as f64 / w.rows as f64).sqrt(),
        seed_claim: 1.0,
        ratios,
    })
}
