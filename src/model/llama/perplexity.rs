//! Sliding-window perplexity and next-token sampling.
//!
//! Perplexity follows the Hugging Face recipe: windows of `context` tokens advance by
//! `stride`; each window scores only the tokens no earlier window scored, so every token after
//! the first is predicted once, with up to `context − stride` tokens of history.

use rand::Rng as _;
use rayon::prelude::*;
use serde::Serialize;

use super::forward::Llama;
use crate::init::rng::Rng;
use crate::model::ModelError;

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
pub fn perplexity(
    model: &mut Llama,
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
        cache.clear();
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

/// Picks the next token from one row of logits: greedy when `temperature <= 0`, otherwise a
/// draw from `softmax(logits / temperature)` restricted to the `top_k` largest (0: all).
pub fn sample(logits: &[f32], temperature: f32, top_k: usize, rng: &mut Rng) -> u32 {
    let argmax = logits
        .iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (i, &x)| if x > b.1 { (i, x) } else { b },
        )
        .0;
    if temperature <= 0.0 {
        return argmax as u32;
    }
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    if top_k > 0 && top_k < logits.len() {
        idx.select_nth_unstable_by(top_k - 1, |&a, &b| logits[b].total_cmp(&logits[a]));
        idx.truncate(top_k);
    }
    let mx = logits[argmax];
    let w: Vec<f64> = idx
        .iter()
        .map(|&i| (((logits[i] - mx) / temperature) as f64).exp())
        .collect();
    let total: f64 = w.iter().sum();
    let mut u = rng.random::<f64>() * total;
    for (&i, &wi) in idx.iter().zip(&w) {
        if u < wi {
            return i as u32;
        }
        u -= wi;
    }
    argmax as u32
}
