//! Text generation from a GPT: encode the prompt, then repeatedly run the model on the last
//! `context` tokens, sample the next token from the last position's logits and hand each new
//! piece of text to the caller as soon as it is complete (streaming). The seed fixes the text.

use super::sample::sample_next;
use crate::Result;
use crate::data::Tokenizer;
use crate::init::rng::seeded;
use crate::model::Gpt;

/// Sampling settings.
#[derive(Debug, Clone, Copy)]
pub struct SampleOptions {
    /// Tokens to generate.
    pub max_new_tokens: usize,
    /// Temperature (0: greedy).
    pub temperature: f32,
    /// Top-k (0: all).
    pub top_k: usize,
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
        Ok(())
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
    opts.validate()?;
    let context = model.config().context;
    let vocab = model.config().vocab_size;
    let mut ids = tokenizer.encode(prompt)?;
    if ids.is_empty() {
        // An empty prompt starts from token 0 (a newline for character-level Shakespeare).
        ids.push(0);
    }
    let prompt_len = ids.len();
    let mut rng = seeded(opts.seed);
    let mut shown = tokenizer.decode(&ids)?;
    for _ in 0..opts.max_new_tokens {
        let window = &ids[ids.len().saturating_sub(context)..];
        let t = window.len();
        let logits = model.logits(window, 1, t)?;
        let last = &logits[(t - 1) * vocab..t * vocab];
        ids.push(sample_next(last, opts.temperature, opts.top_k, &mut rng));
        // Emit only text that is complete (BPE may stop inside a multi-byte character).
        let text = tokenizer.decode(&ids)?;
        if !text.ends_with('\u{FFFD}') && text.len() > shown.len() && text.starts_with(&shown) {
            emit(&text[shown.len()..])?;
            shown = text;
        }
    }
    let text = tokenizer.decode(&ids)?;
    if text.len() > shown.len() && text.starts_with(&shown) {
        emit(&text[shown.len()..])?;
    }
    Ok(ids[prompt_len..].to_vec())
}
