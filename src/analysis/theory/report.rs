//! `orthoformer theory`'s measurements on a trained model: per layer and head, the norm ratio
//! and distance distortion of the frozen projection (or of a Haar-random one of the same shape
//! when the model's Q/K are trained), and the correlation of `q·k` with `x·y` for the model's
//! own `W_Q`, `W_K` and for random independent and random tied orthonormal projections.

use serde::Serialize;

use super::activations::{attention_inputs, head_projection};
use super::{
    Distortion, Matrix, NormRatio, QkCorrelation, distance_distortion, norm_ratio, qk_correlation,
};
use crate::init::orthogonal::haar_f64;
use crate::model::{AttnWeight, Gpt};

/// What `orthoformer theory` measures; `Default` holds the command's only defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TheoryOptions {
    /// Positions measured: the last this many tokens of the text (capped at the model's
    /// context).
    pub tokens: usize,
    /// Seed of the random baseline projections.
    pub seed: u64,
}

impl Default for TheoryOptions {
    /// 256 positions, seed 0.
    fn default() -> Self {
        TheoryOptions {
            tokens: 256,
            seed: 0,
        }
    }
}

/// The measurements of one head.
#[derive(Clone, Debug, Serialize)]
pub struct HeadTheory {
    /// Layer index.
    pub layer: usize,
    /// Head index.
    pub head: usize,
    /// Which projection the norm and distance figures are of: `"frozen W_Q"` or
    /// `"random orthonormal"` (when the model's W_Q is trained, so not orthonormal).
    pub projection: String,
    /// `||xW|| / ||x||` over the positions.
    pub norm: NormRatio,
    /// Pairwise distance distortion over the positions.
    pub distance: Distortion,
    /// `q·k` vs `x·y` with the model's own `W_Q`, `W_K`.
    pub model_qk: QkCorrelation,
    /// The same with independent Haar-random `W_Q`, `W_K`.
    pub random_independent: QkCorrelation,
    /// The same with one Haar-random `W` used as both `W_Q` and `W_K`.
    pub random_tied: QkCorrelation,
}

/// Measures every head of every layer on the activations of `tokens`; `seed` draws the random
/// baselines.
pub fn measure(model: &mut Gpt, tokens: &[u32], seed: u64) -> crate::Result<Vec<HeadTheory>> {
    let inputs = attention_inputs(model, tokens)?;
    let (c, heads) = (model.config().d_model, model.config().n_head);
    let d = c / heads;
    let frozen = model.config().attention.frozen_qk();
    let mut out = Vec::new();
    for (l, x) in inputs.iter().enumerate() {
        for h in 0..heads {
            let wq = head_projection(model, l, AttnWeight::Q, h)?;
            let wk = head_projection(model, l, AttnWeight::K, h)?;
            let s = seed.wrapping_add((l * heads + h) as u64 * 2);
            let r1 = Matrix::new(c, d, haar_f64(c, d, 1.0, s)?)?;
            let r2 = Matrix::new(c, d, haar_f64(c, d, 1.0, s + 1)?)?;
            let (proj, label) = if frozen {
                (&wq, "frozen W_Q")
            } else {
                (&r1, "random orthonormal")
            };
            out.push(HeadTheory {
                layer: l,
                head: h,
                projection: label.to_string(),
                norm: norm_ratio(x, proj)?,
                distance: distance_distortion(x, proj)?,
                model_qk: qk_correlation(x, &wq, &wk)?,
                random_independent: qk_correlation(x, &r1, &r2)?,
                random_tied: qk_correlation(x, &r1, &r1)?,
            });
        }
    }
    Ok(out)
}

/// The per-layer table (means over heads) as aligned text.
pub fn table(heads: &[HeadTheory]) -> String {
    let mut out = format!(
        "{:>5} {:>10} {:>10} {:>9} {:>10} {:>8} {:>10} {:>10} {:>10}\n",
        "layer",
        "|xW|/|x|",
        "sqrt(k/n)",
        "JL eps",
        "max dist",
        "p95",
        "r(model)",
        "r(indep)",
        "r(tied)"
    );
    let layers = heads.iter().map(|h| h.layer).max().map_or(0, |m| m + 1);
    for l in 0..layers {
        let hs: Vec<&HeadTheory> = heads.iter().filter(|h| h.layer == l).collect();
        let mean = |f: &dyn Fn(&HeadTheory) -> f64| {
            hs.iter().map(|h| f(h)).sum::<f64>() / hs.len().max(1) as f64
        };
        let jl = hs
            .first()
            .and_then(|h| h.distance.jl_epsilon)
            .map_or("none".to_string(), |e| format!("{e:.3}"));
        out += &format!(
            "{l:>5} {:>10.4} {:>10.4} {jl:>9} {:>10.3} {:>8.3} {:>10.3} {:>10.3} {:>10.3}\n",
            mean(&|h| h.norm.mean),
            mean(&|h| h.norm.predicted),
            mean(&|h| h.distance.max_distortion),
            mean(&|h| h.distance.p95_distortion),
            mean(&|h| h.model_qk.pearson),
            mean(&|h| h.random_independent.pearson),
            mean(&|h| h.random_tied.pearson),
        );
    }
    out
}
