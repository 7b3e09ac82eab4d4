//! RMSNorm over the last dimension (inference): `y = x / sqrt(mean(x²) + ε) ⊙ γ`, as Hugging
//! Face's `LlamaRMSNorm` and llama.cpp's `ggml_rms_norm` followed by the weight multiply.
//!
//! The mean of squares and `1/sqrt(· + ε)` are computed in f64 (with [`LANES`] partial sums,
//! which vectorise) and the scale rounded once to f32, so the result does not depend on how
//! the row's sum is associated. Rows are split over rayon in fixed blocks of `ROWS`, so
//! results do not depend on the thread count.

use super::simd::{LANES, dispatch};
use rayon::prelude::*;

/// Rows per rayon task.
const ROWS: usize = 32;

/// `y[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ gamma` for every row `r` of width `C = gamma.len()`
/// (`y`, `x`: `N x C`).
pub fn forward(y: &mut [f32], x: &[f32], gamma: &[f32], eps: f64) {
    let c = gamma.len();
    assert!(
        c > 0 && y.len() == x.len() && x.len().is_multiple_of(c),
        "rmsnorm: shapes"
    );
    if x.len() <= ROWS * c {
        forward_rows(y, x, gamma, eps);
        return;
    }
    y.par_chunks_mut(ROWS * c)
        .zip(x.par_chunks(ROWS * c))
        .for_each(|(y, x)| forward_rows(y, x, gamma, eps));
}

dispatch! {
    /// [`forward`] on the calling thread.
    pub fn forward_rows(y: &mut [f32], x: &[f32], gamma: &[f32], eps: f64) {
        let c = gamma.len();
        for (yr, xr) in y.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
            let mut acc = [0.0f64; LANES];
            let mut chunks = xr.chunks_exact(LANES);
            for ch in &mut chunks {
                for (a, &v) in acc.iter_mut().zip(ch) {
                    *a += f64::from(v) * f64::from(v);
                }
            }
            let tail: f64 = chunks.remainder().iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            let ms = (tail + acc.iter().sum::<f64>()) / c as f64;
            let inv = (1.0 / (ms + eps).sqrt()) as f32;
            for ((o, &v), &g) in yr.iter_mut().zip(xr).zip(gamma) {
                *o = v * inv * g;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::simd::{available, with_isa};

    #[test]
    fn matches_f64_on_every_isa() {
        let c = 579; // not a multiple of LANES: the tail runs too
        let x: Vec<f32> = (0..3 * c)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.07)
            .collect();
        let g: Vec<f32> = (0..c).map(|i| 0.5 + (i % 7) as f32 * 0.1).collect();
        for isa in available() {
            let mut y = vec![0.0; x.len()];
            with_isa(isa, || forward_rows(&mut y, &x, &g, 1e-5));
            for (r, (yr, xr)) in y.chunks(c).zip(x.chunks(c)).enumerate() {
                let ms = xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / c as f64;
                let inv = 1.0 / (ms + 1e-5).sqrt();
                for ((&o, &v), &gv) in yr.iter().zip(xr).zip(&g) {
                    let want = v as f64 * inv * gv as f64;
                    assert!(
                        (o as f64 - want).abs() < 1e-6 * (1.0 + want.abs()),
                        "{isa:?} row {r}: {o} vs {want}"
                    );
                }
            }
        }
    }
}
