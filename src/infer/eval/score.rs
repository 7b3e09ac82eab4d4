//! Scoring windows one at a time through [`CausalLm::prefill`]: what any causal model can do,
//! and the default of [`CausalLm::score_windows`].

use rayon::prelude::*;

use super::{LogitsSink, Window};
use crate::infer::causal_lm::CausalLm;

/// `log Σ exp(row)`, in f64, shifted by the row's maximum so nothing overflows.
pub fn log_sum_exp(row: &[f32]) -> f64 {
    let mx = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    row.iter().map(|&v| (v as f64 - mx).exp()).sum::<f64>().ln() + mx
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
