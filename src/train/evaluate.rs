//! Evaluation of a trained model on a whole text: the mean cross-entropy over consecutive
//! non-overlapping windows of `T` tokens (every token scored once), perplexity `e^loss`, and
//! bits per character (character tokenizer) or per byte (BPE):
//! `bits/unit = loss · tokens / (units · ln 2)`.

use super::model_api::Trainable;
use crate::Result;
use crate::data::Tokenizer;

/// Evaluation figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EvalReport {
    /// Mean cross-entropy per token (nats).
    pub loss: f64,
    /// `e^loss`.
    pub perplexity: f64,
    /// Bits per character or per byte.
    pub bits_per_unit: f64,
    /// "character" or "byte".
    pub unit: String,
    /// Tokens scored.
    pub tokens: usize,
    /// Characters or bytes those tokens cover.
    pub units: usize,
}

/// Scores `tokens` in windows of `t` (+1 for the target), `b` windows per batch, at most
/// `max_batches` batches (`None`: all). `units_per_token` converts to bits per unit. Zero
/// `b`, `t` or `max_batches`, or a text shorter than one window, is an error (never a NaN).
pub fn evaluate_tokens<M: Trainable>(
    model: &mut M,
    tokens: &[u32],
    b: usize,
    t: usize,
    max_batches: Option<usize>,
    units_per_token: f64,
    unit: &str,
) -> Result<EvalReport> {
    if b == 0 || t == 0 {
        return Err(super::invalid(format!(
            "evaluation needs a batch and a sequence length of at least 1 (got {b} x {t})"
        )));
    }
    if max_batches == Some(0) {
        return Err(super::invalid(
            "--eval-iters 0 scores nothing: use at least 1 (or leave it out to score the whole text)",
        ));
    }
    if tokens.len() <= t {
        return Err(super::invalid(format!(
            "{} tokens cannot fill one window of {t} + 1: use a longer text",
            tokens.len()
        )));
    }
    let windows = (tokens.len() - 1) / t;
    let mut starts: Vec<usize> = (0..windows).map(|w| w * t).collect();
    if let Some(m) = max_batches {
        starts.truncate(m.saturating_mul(b));
    }
    let (mut sum, mut scored) = (0.0f64, 0usize);
    for chunk in starts.chunks(b) {
        let mut inputs = Vec::with_capacity(chunk.len() * t);
        let mut targets = Vec::with_capacity(chunk.len() * t);
        for &s in chunk {
            inputs.extend_from_slice(&tokens[s..s + t]);
            targets.extend_from_slice(&tokens[s + 1..s + t + 1]);
        }
        let loss = model.eval_loss(&inputs, &targets, chunk.len(), t)? as f64;
        sum += loss * (chunk.len() * t) as f64;
        scored += chunk.len() * t;
    }
    let loss = sum / scored as f64;
    let units = (scored as f64 * units_per_token).round() as usize;
    Ok(EvalReport {
        loss,
        perplexity: loss.exp(),
        bits_per_unit: loss / (units_per_token * std::f64::consts::LN_2),
        unit: unit.to_string(),
        tokens: scored,
        units,
    })
}

/// Characters (char tokenizer) or bytes (BPE) per token of `text`.
pub fn units_per_token(tokenizer: &Tokenizer, text: &str, n_tokens: usize) -> f64 {
    tokenizer.units_in(text) as f64 / n_tokens.max(1) as f64
}
