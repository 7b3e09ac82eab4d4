//! Generation, once for every [`CausalLm`]: prefill the prompt, then sample a token from the
//! last row of logits and decode it through the model's cache, until `max_new_tokens` or a stop
//! id ([`generate_ids`]). [`generate`] wraps it for a GPT checkpoint's text, handing each new
//! piece of text to the caller as soon as it is complete (streaming). The seed fixes the text.

use super::sample::sample_next;
use crate::Result;
use crate::data::Tokenizer;
use crate::init::rng::seeded;
use crate::model::{CausalLm, Gpt};

/// Sampling settings.
#[derive(Debug, Clone, Copy)]
pub struct SampleOptions {
    /// Tokens to generate.
    pub max_new_tokens: usize,
    /// Temperature (0: greedy).
    pub temperature: f32,
    /// Top-k (0: all).
    pub top_k: usize,
    /// Top-p, nucleus sampling (1: all).
    pub top_p: f64,
    /// Seed.
    pub seed: u64,
}

impl SampleOptions {
    /// Checks the settings, the same rules for every model (a checkpoint or a pretrained
    /// one): the temperature is a finite number `>= 0`.
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(super::invalid(format!(
                "--temperature {} must be 0 (greedy) or a positive number",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(super::invalid(format!(
                "--top-p {} must be in (0, 1] (1 keeps every token)",
                self.top_p
            )));
        }
        Ok(())
    }
}

/// Samples up to `opts.max_new_tokens` ids after `prompt` (only its last `context` ids are
/// run), calling `on_token` with each as it is drawn, and stops after the first id in `stop`
/// (which is kept). Returns the new ids.
pub fn generate_ids<M: CausalLm>(
    model: &mut M,
    prompt: &[u32],
    opts: SampleOptions,
    stop: &[u32],
    on_token: &mut dyn FnMut(u32) -> Result<()>,
) -> Result<Vec<u32>> {
    opts.validate()?;
    if prompt.is_empty() {
        return Err(super::invalid("the prompt is empty: pass --prompt TEXT"));
    }
    let mut out = Vec::new();
    if opts.max_new_tokens == 0 {
        return Ok(out);
    }
    let window = &prompt[prompt.len().saturating_sub(model.context())..];
    let mut cache = model.new_cache(window.len().saturating_add(opts.max_new_tokens))?;
    let mut rng = seeded(opts.seed);
    let draw = |logits: &[f32], rng: &mut _| {
        sample_next(logits, opts.temperature, opts.top_k, opts.top_p, rng)
    };
    let mut next = draw(
        model.prefill(window, &mut cache, window.len() - 1)?,
        &mut rng,
    );
    loop {
        out.push(next);
        on_token(next)?;
        if stop.contains(&next) || out.len() == opts.max_new_tokens {
            return Ok(out);
        }
        next = draw(model.decode_one(next, &mut cache)?, &mut rng);
    }
}

/// Generates after `prompt`, calling `emit` with each new piece of text. Returns the ids.
pub fn generate(
    model: &mut Gpt,
    tokenizer: &Tokenizer,
    prompt: &str,
    opts: SampleOptions,
    emit: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<Vec<u32>> {
    let mut ids = tokenizer.encode(prompt)?;
    if ids.is_empty() {
        // An empty prompt starts from token 0 (a newline for character-level Shakespeare).
        ids.push(0);
    }
    let prompt_len = ids.len();
    let mut shown = tokenizer.decode(&ids)?;
    let mut all = ids.clone();
    generate_ids(model, &ids, opts, &[], &mut |next| {
        all.push(next);
        // Emit only text that is complete (BPE may stop inside a multi-byte character).
        let text = tokenizer.decode(&all)?;
        if !text.ends_with('\u{FFFD}') && text.len() > shown.len() && text.starts_with(&shown) {
            emit(&text[shown.len()..])?;
            shown = text;
        }
        Ok(())
    })?;
    let text = tokenizer.decode(&all)?;
    if text.len() > shown.len() && text.starts_with(&shown) {
        emit(&text[shown.len()..])?;
    }
    Ok(all[prompt_len..].to_vec())
}

/// What one generation did, for `generate --json`: the text, and how fast the prompt was
/// read and the new tokens were made.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GenerateReport {
    /// The prompt as given.
    pub prompt: String,
    /// The generated continuation (without the prompt).
    pub text: String,
    /// Tokens of the prompt that were run (its last `context` tokens at most).
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub new_tokens: usize,
    /// Whether generation ended on a stop token (else on `max_new_tokens`).
    pub stopped_on_eos: bool,
    /// Prompt tokens per second: the prompt's prefill and the first token's sampling.
    pub prompt_tokens_per_s: f64,
    /// Generated tokens per second after the first: one decode step and one draw each.
    pub decode_tokens_per_s: Option<f64>,
}
