//! Several generations at once: every prompt is read on its own (a prompt is already a block
//! of rows that the panel products reuse each weight across), then the sequences decode
//! together, one batched step ([`CausalLm::decode_batch`]) making the next token of every
//! sequence still running, until each reaches `max_new_tokens` or a stop id.
//!
//! Sequence `i` samples with seed `seed + i` from its own generator, so with the integer
//! decode products (the pretrained default) sequence `i` of a batch is the text that one
//! generation with seed `seed + i` makes, token for token.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::generate::{SampleOptions, draw_next, interrupted};
use super::generate_job::GenerateJob;
use super::text_model::TextModel;
use crate::Result;
use crate::infer::CausalLm;
use crate::init::rng::seeded;
use crate::model::llama::KvDtype;
use crate::nn::qmatvec::MatvecInput;

/// The most sequences one batch generates: each holds its own KV cache, and a batch past
/// a few hundred rows no longer reads each weight fewer times per token than a prompt does.
pub const MAX_SEQUENCES: usize = 1024;

/// What to generate in one batch: the prompts, how many sequences each, and the settings
/// every sequence shares.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchJob {
    /// The texts to continue, one or more sequences each (an empty text starts from the
    /// model's start token).
    pub prompts: Vec<String>,
    /// Sequences per prompt (at least 1): sequence `p·parallel + j` continues prompt `p`.
    pub parallel: usize,
    /// Token budget and sampling of every sequence; sequence `i` draws with seed `seed + i`
    /// (wrapping).
    pub options: SampleOptions,
    /// As [`GenerateJob::kv_cache`].
    pub kv_cache: Option<KvDtype>,
    /// As [`GenerateJob::dot`].
    pub dot: Option<MatvecInput>,
}

impl BatchJob {
    /// The one generation that sequence `i` of the batch is, on its own.
    pub fn sequence(&self, i: usize) -> GenerateJob {
        let parallel = self.parallel.max(1);
        GenerateJob {
            prompt: self.prompts[i / parallel].clone(),
            options: SampleOptions {
                seed: self.options.seed.wrapping_add(i as u64),
                ..self.options
            },
            kv_cache: self.kv_cache,
            dot: self.dot,
        }
    }

    /// Sequences in the batch.
    pub fn sequences(&self) -> usize {
        self.prompts.len().saturating_mul(self.parallel)
    }

    /// Checks the job's own values (before any file is read).
    pub fn validate(&self) -> Result<()> {
        self.options.validate()?;
        if self.prompts.is_empty() {
            return Err(crate::data::invalid(
                "a batch needs at least one prompt in `prompts`",
            ));
        }
        if self.parallel == 0 {
            return Err(crate::data::invalid(
                "`parallel` 0: every prompt needs at least 1 sequence",
            ));
        }
        if self.sequences() > MAX_SEQUENCES {
            return Err(crate::data::invalid(format!(
                "{} prompts x `parallel` {} is {} sequences, more than one batch makes \
                 ({MAX_SEQUENCES}): split them over several calls",
                self.prompts.len(),
                self.parallel,
                self.sequences()
            )));
        }
        Ok(())
    }

    /// The pretrained model's settings a checkpoint refuses ([`GenerateJob::check_checkpoint`]).
    pub fn check_checkpoint(&self) -> Result<()> {
        self.sequence(0).check_checkpoint()
    }
}

/// One sequence of a batch: what [`super::generate::GenerateReport`] says of one generation,
/// less the speeds (the batch has them).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SequenceReport {
    /// The prompt as given.
    pub prompt: String,
    /// The seed the sequence sampled with.
    pub seed: u64,
    /// The generated continuation (without the prompt).
    pub text: String,
    /// Tokens of the prompt that were run (its last `context` tokens at most).
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub new_tokens: usize,
    /// Whether the sequence ended on a stop token (else on `max_new_tokens`).
    pub stopped_on_eos: bool,
}

/// What one batch did, for `generate --json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BatchReport {
    /// Every sequence, in order.
    pub sequences: Vec<SequenceReport>,
    /// Prompt tokens of all sequences per second of the prompt phase (every prompt's
    /// prefill and first draw).
    pub prompt_tokens_per_s: f64,
    /// Tokens made by the batched steps (all but each sequence's first) per second of them.
    pub decode_tokens_per_s: Option<f64>,
}

/// Samples after each of `prompts` (only the last `context` ids of each run), every
/// sequence as [`super::generate::generate_ids`] would with `seeds[i]`, the decode steps of
/// all running sequences in one batch. `on_step` is called after every batched step with
/// the tokens made so far; a true `interrupt` stops the batch at the next step. Returns the
/// new ids of each sequence.
pub fn generate_batch_ids<M: CausalLm>(
    model: &mut M,
    prompts: &[Vec<u32>],
    seeds: &[u64],
    opts: SampleOptions,
    stop: &[u32],
    interrupt: &AtomicBool,
    on_step: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<(Vec<Vec<u32>>, f64)> {
    opts.validate()?;
    assert_eq!(prompts.len(), seeds.len(), "one seed per prompt");
    if let Some(i) = prompts.iter().position(|p| p.is_empty()) {
        return Err(crate::data::invalid(format!(
            "prompt {i} of the batch is empty: pass a `prompt`"
        )));
    }
    let n = prompts.len();
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
    if opts.max_new_tokens == 0 || n == 0 {
        return Ok((out, 0.0));
    }
    let windows: Vec<&[u32]> = prompts
        .iter()
        .map(|p| &p[p.len().saturating_sub(model.context())..])
        .collect();
    let caps: Vec<usize> = windows
        .iter()
        .map(|w| w.len().saturating_add(opts.max_new_tokens))
        .collect();
    // Each cache checks itself; their sum is checked here, before the first is made.
    let total = caps.iter().try_fold(0usize, |acc, &cap| {
        model.cache_bytes(cap).and_then(|b| acc.checked_add(b))
    });
    crate::io::memory::check_fits(total, format_args!("the KV caches of {n} sequences"))?;
    let mut caches = Vec::with_capacity(n);
    let mut rngs: Vec<_> = seeds.iter().map(|&s| seeded(s)).collect();
    let mut next = Vec::with_capacity(n);
    for (i, window) in windows.iter().enumerate() {
        let mut cache = model.new_cache(caps[i])?;
        let logits = model.prefill(window, &mut cache, window.len() - 1)?;
        next.push(draw_next(logits, &opts, &mut rngs[i])?);
        caches.push(cache);
    }
    let prompt_done = Instant::now();
    let mut running: Vec<usize> = (0..n).collect();
    let mut logits = Vec::new();
    let mut made = 0;
    loop {
        running.retain(|&i| {
            let t = next[i];
            out[i].push(t);
            made += 1;
            !stop.contains(&t) && out[i].len() < opts.max_new_tokens
        });
        on_step(made)?;
        if running.is_empty() {
            return Ok((out, prompt_done.elapsed().as_secs_f64()));
        }
        if interrupt.load(Ordering::Relaxed) {
            return Err(interrupted());
        }
        let steps: Vec<(usize, u32)> = running.iter().map(|&i| (i, next[i])).collect();
        model.decode_batch(&mut caches, &steps, &mut logits)?;
        let v = model.vocab_size();
        for (row, &i) in logits.chunks_exact(v).zip(&running) {
            next[i] = draw_next(row, &opts, &mut rngs[i])?;
        }
    }
}

/// Generates as `job` says with the model `open` gives: every sequence's prompt and stop
/// ids by the rules of one generation ([`super::generate_job::run`]), the decode steps in
/// one batch. `on_step` hears the number of tokens made so far after every step (progress).
pub fn run<M: CausalLm>(
    job: &BatchJob,
    open: impl FnOnce() -> Result<TextModel<M>>,
    interrupt: &AtomicBool,
    on_step: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<BatchReport> {
    job.validate()?;
    let mut lm = open()?;
    let started = Instant::now();
    let (mut prompts, mut seeds) = (Vec::new(), Vec::new());
    for i in 0..job.sequences() {
        let seq = job.sequence(i);
        let ids = if i % job.parallel == 0 {
            lm.prompt_ids(&seq.prompt)?
        } else {
            prompts.last().cloned().unwrap_or_default()
        };
        let new = job.options.max_new_tokens;
        if let Some(max) = lm.model.cache_limit()
            && ids.len().saturating_add(new) > max
        {
            return Err(crate::data::invalid(format!(
                "prompt {} ({} tokens) + `max_new_tokens` {new} exceed the model's context of \
                 {max}",
                i / job.parallel,
                ids.len()
            )));
        }
        prompts.push(ids);
        seeds.push(seq.options.seed);
    }
    let stop = lm.stop_ids();
    let (ids, decode_secs) = generate_batch_ids(
        &mut lm.model,
        &prompts,
        &seeds,
        job.options,
        &stop,
        interrupt,
        on_step,
    )?;
    let total = started.elapsed().as_secs_f64();
    let context = lm.model.context();
    let mut sequences = Vec::with_capacity(ids.len());
    for (i, new) in ids.iter().enumerate() {
        sequences.push(SequenceReport {
            prompt: job.prompts[i / job.parallel].clone(),
            seed: seeds[i],
            text: lm.tokenizer.decode(new)?,
            prompt_tokens: prompts[i].len().min(context),
            new_tokens: new.len(),
            stopped_on_eos: new.last().is_some_and(|t| stop.contains(t)),
        });
    }
    let prompt_secs = total - decode_secs;
    let read: usize = sequences.iter().map(|s| s.prompt_tokens).sum();
    let stepped: usize = sequences
        .iter()
        .map(|s| s.new_tokens.saturating_sub(1))
        .sum();
    Ok(BatchReport {
        sequences,
        prompt_tokens_per_s: if prompt_secs > 0.0 {
            read as f64 / prompt_secs
        } else {
            0.0
        },
        decode_tokens_per_s: (stepped > 0 && decode_secs > 0.0)
            .then(|| stepped as f64 / decode_secs),
    })
}
