//! Generation, once for every [`CausalLm`]: prefill the prompt, then sample a token from the
//! last row of logits and decode it through the model's cache, until `max_new_tokens` or a stop
//! id ([`generate_ids`]). [`generate_text`] wraps it for text, handing each new piece to the
//! caller as soon as it is complete (streaming) and timing the prompt and the decode steps.
//! The seed fixes the text. A call makes at most [`MAX_NEW_TOKENS`] tokens, and a caller can
//! stop it between two tokens ([`generate_text_until`]: Ctrl-C in Python).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::Result;
use crate::infer::CausalLm;
use crate::infer::sample::sample_next;
use crate::init::rng::seeded;

/// The most tokens one generation makes. A model whose cache stores every position (Llama)
/// is bounded by its context anyway; a GPT slides over its last `context` tokens and could go
/// on for ever, its token list growing by 4 bytes per token: 2^20 (1,048,576) tokens are
/// hours of text and 4 MiB, and a slip such as 10^12 is refused instead of running for years.
pub const MAX_NEW_TOKENS: usize = 1 << 20;

/// Sampling settings: what `orthoformer generate` asks for; `Default` holds the command's
/// only defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
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

impl Default for SampleOptions {
    /// 200 tokens sampled from the full distribution (temperature 1, no top-k or top-p cut),
    /// seed 0.
    fn default() -> Self {
        SampleOptions {
            max_new_tokens: 200,
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

impl SampleOptions {
    /// Checks the settings, the same rules for every model (a checkpoint or a pretrained
    /// one): at most [`MAX_NEW_TOKENS`] tokens, the temperature a finite number `>= 0`,
    /// `top_p` in (0, 1].
    pub fn validate(&self) -> Result<()> {
        if self.max_new_tokens > MAX_NEW_TOKENS {
            return Err(crate::data::invalid(format!(
                "`max_new_tokens` {} is more than one generation makes ({MAX_NEW_TOKENS}): ask \
                 for fewer tokens, or continue the text in several calls",
                self.max_new_tokens
            )));
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(crate::data::invalid(format!(
                "`temperature` {} must be 0 (greedy) or a positive number",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(crate::data::invalid(format!(
                "`top_p` {} must be in (0, 1] (1 keeps every token)",
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
        return Err(crate::data::invalid("the prompt is empty: pass a `prompt`"));
    }
    let mut out = Vec::new();
    if opts.max_new_tokens == 0 {
        return Ok(out);
    }
    let window = &prompt[prompt.len().saturating_sub(model.context())..];
    let mut cache = model.new_cache(window.len().saturating_add(opts.max_new_tokens))?;
    let mut rng = seeded(opts.seed);
    let draw = |logits: &[f32], rng: &mut _| draw_next(logits, &opts, rng);
    let mut next = draw(
        model.prefill(window, &mut cache, window.len() - 1)?,
        &mut rng,
    )?;
    loop {
        out.push(next);
        on_token(next)?;
        if stop.contains(&next) || out.len() == opts.max_new_tokens {
            return Ok(out);
        }
        next = draw(model.decode_one(next, &mut cache)?, &mut rng)?;
    }
}

/// The next id drawn from a row of logits as `opts` says. NaN or +inf logits would be
/// sampled as the lowest id (every comparison fails): a broken model is refused, not
/// continued.
pub(crate) fn draw_next(
    logits: &[f32],
    opts: &SampleOptions,
    rng: &mut crate::init::rng::Rng,
) -> Result<u32> {
    if let Some(bad) = logits.iter().find(|l| l.is_nan() || **l == f32::INFINITY) {
        return Err(crate::data::invalid(format!(
            "the model's next-token logits hold {bad} (its weights hold NaN or infinity, or its \
             logits overflow): nothing to sample"
        )));
    }
    Ok(sample_next(
        logits,
        opts.temperature,
        opts.top_k,
        opts.top_p,
        rng,
    ))
}

/// Receives each new piece of generated text.
pub type TextSink<'a> = dyn FnMut(&str) -> Result<()> + 'a;

/// Generates after the ids `prompt` (the text `prompt_text`) with any [`CausalLm`], handing
/// each new piece of text to `emit` as soon as it is complete (when given: streaming), and
/// reports the continuation with the prompt and decode speeds. `detok` turns ids into text;
/// the whole continuation is decoded each time, so characters that span tokens come out whole.
pub fn generate_text<M: CausalLm>(
    model: &mut M,
    prompt_text: &str,
    prompt: &[u32],
    opts: SampleOptions,
    stop: &[u32],
    detok: &dyn Fn(&[u32]) -> Result<String>,
    emit: Option<&mut TextSink<'_>>,
) -> Result<GenerateReport> {
    let never = AtomicBool::new(false);
    generate_text_until(model, prompt_text, prompt, opts, stop, detok, emit, &never)
}

/// [`generate_text`] that ends with an error ([`interrupted`]) at the first token after
/// `interrupt` becomes true: a caller on another thread (Python waiting for Ctrl-C) stops a
/// long generation without waiting for `max_new_tokens`.
#[allow(clippy::too_many_arguments)]
pub fn generate_text_until<M: CausalLm>(
    model: &mut M,
    prompt_text: &str,
    prompt: &[u32],
    opts: SampleOptions,
    stop: &[u32],
    detok: &dyn Fn(&[u32]) -> Result<String>,
    mut emit: Option<&mut TextSink<'_>>,
    interrupt: &AtomicBool,
) -> Result<GenerateReport> {
    let (mut out, mut printed) = (Vec::new(), 0usize);
    let started = Instant::now();
    let (mut first, mut last): (Option<Instant>, Instant) = (None, started);
    generate_ids(model, prompt, opts, stop, &mut |next| {
        if interrupt.load(Ordering::Relaxed) {
            return Err(interrupted());
        }
        last = Instant::now();
        first.get_or_insert(last);
        out.push(next);
        if let Some(emit) = emit.as_mut() {
            let text = detok(&out)?;
            if !text.ends_with('\u{FFFD}') && text.len() > printed && text.is_char_boundary(printed)
            {
                emit(&text[printed..])?;
                printed = text.len();
            }
        }
        Ok(())
    })?;
    let text = detok(&out)?;
    if let Some(emit) = emit
        && text.len() > printed
        && text.is_char_boundary(printed)
    {
        emit(&text[printed..])?;
    }
    let run = prompt.len().min(model.context());
    let prompt_secs = first.map_or(0.0, |f| (f - started).as_secs_f64());
    let decode_secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
    Ok(GenerateReport {
        prompt: prompt_text.to_string(),
        text,
        prompt_tokens: run,
        new_tokens: out.len(),
        stopped_on_eos: out.last().is_some_and(|t| stop.contains(t)),
        prompt_tokens_per_s: if prompt_secs > 0.0 {
            run as f64 / prompt_secs
        } else {
            0.0
        },
        decode_tokens_per_s: (out.len() > 1 && decode_secs > 0.0)
            .then(|| (out.len() - 1) as f64 / decode_secs),
    })
}

/// The error of a generation stopped by its caller ([`generate_text_until`]).
pub fn interrupted() -> crate::Error {
    crate::data::invalid("generation interrupted before `max_new_tokens` or a stop token")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gpt, GptConfig};

    /// A caller stops a long generation between two tokens (Python's Ctrl-C raises
    /// the flag from another thread; here the sink raises it after three pieces).
    #[test]
    fn an_interrupt_stops_generation_at_the_next_token() {
        let cfg = GptConfig {
            vocab_size: 8,
            ..GptConfig::preset("tiny").unwrap()
        };
        let mut gpt = Gpt::new(cfg, 1).unwrap();
        let opts = SampleOptions {
            max_new_tokens: MAX_NEW_TOKENS,
            ..SampleOptions::default()
        };
        let detok = |ids: &[u32]| Ok("x".repeat(ids.len()));
        let interrupt = AtomicBool::new(false);
        let mut pieces = 0;
        let mut sink = |_: &str| {
            pieces += 1;
            if pieces == 3 {
                interrupt.store(true, Ordering::Relaxed);
            }
            Ok(())
        };
        let sink: &mut TextSink<'_> = &mut sink;
        let err = generate_text_until(
            &mut gpt,
            "",
            &[0],
            opts,
            &[],
            &detok,
            Some(sink),
            &interrupt,
        )
        .unwrap_err();
        assert!(crate::error::one_line(&err).contains("generation interrupted"));
        assert_eq!(pieces, 3, "no token after the interrupt");
    }
}
