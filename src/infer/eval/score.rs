//! Scoring windows one at a time through [`CausalLm::prefill`]: what any causal model can do,
//! and the default of [`CausalLm::score_windows`].

use rayon::prelude::*;

use super::{LogitsSink, Window};
use crate::infer::causal_lm::CausalLm;
use crate::nn::simd;

/// `log Σ exp(row)`, shifted by the row's maximum so nothing overflows: each term in f32
/// (vectorised), the sum and the logarithm in f64, within 1e-6 of the all-f64 sum
/// (`lse_matches_the_f64_sum`). NaN anywhere gives NaN.
pub fn log_sum_exp(row: &[f32]) -> f64 {
    let mx = simd::max(row);
    simd::sum_exp_shifted_f64(row, mx).ln() + f64::from(mx)
}

/// `log softmax(row)[target]`, in f64.
pub fn log_prob(row: &[f32], target: usize) -> f64 {
    row[target] as f64 - log_sum_exp(row)
}

/// `−Σ log p(target)` over `rows` (`targets.len() x V`), the rows in parallel (a wide f64
/// log-softmax each) and summed in order, so the result does not depend on the thread count.
pub fn nll_of_rows(rows: &[f32], targets: &[u32], v: usize) -> f64 {
    let lp: Vec<f64> = targets
        .par_iter()
        .enumerate()
        .map(|(r, &t)| log_prob(&rows[r * v..(r + 1) * v], t as usize))
        .collect();
    let mut nll = 0.0f64;
    for x in lp {
        nll -= x;
    }
    nll
}

/// Each window prefilled alone in `cache` (cleared first); returns the summed negative
/// log-likelihood of the scored targets and hands each window's scored logits to `logits`.
pub fn score_each<M: CausalLm + ?Sized>(
    model: &mut M,
    tokens: &[u32],
    windows: &[Window],
    cache: &mut M::Cache,
    mut logits: Option<&mut LogitsSink<'_>>,
) -> crate::Result<f64> {
    let v = model.vocab_size();
    let mut nll = 0.0f64;
    for w in windows {
        model.clear_cache(cache);
        let rows = model.prefill(&tokens[w.begin..w.end], cache, w.from)?;
        let targets = w.targets();
        nll += nll_of_rows(rows, &tokens[targets.clone()], v);
        if let Some(sink) = logits.as_deref_mut() {
            sink(rows, targets);
        }
    }
    Ok(nll)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The all-f64 reference the vectorised sum replaced.
    fn lse_f64(row: &[f32]) -> f64 {
        let mx = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        row.iter().map(|&v| (v as f64 - mx).exp()).sum::<f64>().ln() + mx
    }

    /// Rows as wide as a pretrained vocabulary, logits spread over ±40, at every instruction
    /// set: within 1e-6 of the f64 sum; NaN stays NaN.
    #[test]
    fn lse_matches_the_f64_sum() {
        let mut r = crate::init::rng::seeded(3);
        for (v, spread) in [(49_152, 40.0f32), (8_192, 5.0), (65, 1.0), (3, 100.0)] {
            let row: Vec<f32> = (0..v)
                .map(|_| rand::Rng::random_range(&mut r, -spread..spread))
                .collect();
            let want = lse_f64(&row);
            for isa in simd::available() {
                let got = simd::with_isa(isa, || log_sum_exp(&row));
                assert!((got - want).abs() < 1e-6, "{v} {isa:?}: {got} vs {want}");
            }
        }
        let mut row = vec![0.5f32; 100];
        row[7] = f32::NAN;
        assert!(log_sum_exp(&row).is_nan());
    }
}
