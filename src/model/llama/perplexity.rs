//! Sliding-window perplexity of any [`CausalLm`] (a pretrained Llama or this crate's GPT).
//!
//! Perplexity follows the Hugging Face recipe: windows of `context` tokens advance by
//! `stride`; each window scores only the tokens no earlier window scored, so every token after
//! the first is predicted once, with up to `context − stride` tokens of history.

use rayon::prelude::*;
use serde::Serialize;

use crate::model::ModelError;
use crate::model::causal_lm::CausalLm;

/// The result of a perplexity run.
#[derive(Debug, Clone, Serialize)]
pub struct Perplexity {
    /// Tokens scored.
    pub tokens: usize,
    /// Mean negative log-likelihood (nats per token).
    pub nll: f64,
    /// `exp(nll)`.
    pub ppl: f64,
}

/// `log softmax(row)[target]`, in f64.
pub fn log_prob(row: &[f32], target: usize) -> f64 {
    let mx = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let lse = row.iter().map(|&v| (v as f64 - mx).exp()).sum::<f64>().ln() + mx;
    row[target] as f64 - lse
}

/// Sliding-window perplexity of `tokens`. `on_window(scored_so_far)` is called after each
/// window (for progress bars). `per_window` receives each window's logits rows with their
/// absolute target positions, for comparisons between models.
pub fn perplexity<M: CausalLm>(
    model: &mut M,
    tokens: &[u32],
    context: usize,
    stride: usize,
    on_window: &mut dyn FnMut(usize),
    per_window: &mut dyn FnMut(&[f32], std::ops::Range<usize>),
) -> crate::Result<Perplexity> {
    if context < 2 || stride == 0 || stride >= context {
        return Err(ModelError::Config(format!(
            "need context >= 2 and 0 < stride < context (got context {context}, stride {stride})"
        ))
        .into());
    }
    if tokens.len() < 2 {
        return Err(ModelError::Config("the text has fewer than 2 tokens".into()).into());
    }
    let v = model.vocab_size();
    let mut cache = model.new_cache(context)?;
    let (mut nll, mut scored, mut prev_end) = (0.0f64, 0usize, 1usize);
    let mut begin = 0;
    loop {
        let end = (begin + context).min(tokens.len());
        // Targets prev_end..end; the logits predicting target j sit at window row j-1-begin.
        let from = prev_end - 1 - begin;
        model.clear_cache(&mut cache);
        let logits = model.prefill(&tokens[begin..end], &mut cache, from)?;
        let rows = end - prev_end;
        // Rows in parallel (a 49,152-wide f64 log-softmax each), summed in order as before.
        let lp: Vec<f64> = (prev_end..end)
            .into_par_iter()
            .map(|j| {
                let r = j - prev_end;
                log_prob(&logits[r * v..(r + 1) * v], tokens[j] as usize)
            })
            .collect();
        for x in lp {
            nll -= x;
        }
        per_window(&logits[..rows * v], prev_end..end);
        scored += rows;
        on_window(scored);
        prev_end = end;
        if end == tokens.len() {
            break;
        }
        begin += stride;
    }
    let mean = nll / scored as f64;
    Ok(Perplexity {
        tokens: scored,
        nll: mean,
        ppl: mean.exp(),
    })
}
