//! `orthoformer generate` as one library operation: [`run`] checks a [`GenerateJob`], opens
//! the model it is handed (a checkpoint's GPT or a pretrained Llama-family model, as a
//! [`TextModel`]), turns the prompt into ids and picks the stop ids by the rules of
//! [`crate::infer::text_model`] (the same for both families), checks that prompt and
//! continuation fit the model, and generates ([`super::generate::generate_text`]). The
//! command line and the Python package only parse their arguments into a job, call [`run`]
//! and print its report, so both refuse the same inputs with the same messages.
//!
//! `kv_cache` and `dot` are settings of a pretrained model: a job that sets either is refused
//! for a checkpoint's GPT ([`GenerateJob::check_checkpoint`]) rather than silently ignored.
//!
//! Messages name the job's fields in backticks (`` `max_new_tokens` ``); each front end
//! writes them as its own argument names (`--max-new-tokens`, `max_new_tokens=`).

use std::sync::atomic::AtomicBool;

use super::generate::{GenerateReport, SampleOptions, TextSink, generate_text_until};
use super::text_model::TextModel;
use crate::Result;
use crate::infer::CausalLm;
use crate::model::llama::KvDtype;
use crate::nn::qmatvec::MatvecInput;

/// What to generate: the prompt, the sampling, and how a pretrained model caches.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateJob {
    /// The text to continue (empty: start from the model's start token).
    pub prompt: String,
    /// Token budget, temperature, top-k, top-p and seed.
    pub options: SampleOptions,
    /// How a pretrained model's KV cache stores keys and values; `None`: f16 (llama.cpp's
    /// default: half the bytes a decode step reads, each key and value rounded to f16). A
    /// checkpoint's GPT has no KV cache and refuses it.
    pub kv_cache: Option<KvDtype>,
    /// What a pretrained model's decode multiplies quantised weights with; `None`:
    /// [`Self::DEFAULT_DOT`]. A checkpoint's GPT has no quantised weights and refuses it.
    pub dot: Option<MatvecInput>,
}

impl Default for GenerateJob {
    /// An empty prompt, [`SampleOptions::default`], and the pretrained model's defaults.
    fn default() -> Self {
        GenerateJob {
            prompt: String::new(),
            options: SampleOptions::default(),
            kv_cache: None,
            dot: None,
        }
    }
}

impl GenerateJob {
    /// The KV cache a pretrained model gets when the job leaves it out.
    pub const DEFAULT_KV_CACHE: KvDtype = KvDtype::F16;
    /// The decode product a pretrained model gets when the job leaves it out: integer dot
    /// products, measured 1.8-2.3x the f32 decode on SmolLM2 on an AVX2 EPYC (1.3-1.45x on an
    /// AVX-512 one) with perplexity within 0.5% of the exact product (docs/BENCHMARKS.md).
    pub const DEFAULT_DOT: MatvecInput = MatvecInput::Q8;

    /// Checks the job's own values (before any file is read).
    pub fn validate(&self) -> Result<()> {
        self.options.validate()
    }

    /// The pretrained model's KV cache: the job's, or [`Self::DEFAULT_KV_CACHE`].
    pub fn kv_cache(&self) -> KvDtype {
        self.kv_cache.unwrap_or(Self::DEFAULT_KV_CACHE)
    }

    /// The pretrained model's decode product: the job's, or [`Self::DEFAULT_DOT`].
    pub fn dot(&self) -> MatvecInput {
        self.dot.unwrap_or(Self::DEFAULT_DOT)
    }

    /// Refuses the settings a checkpoint's GPT has no use for (`kv_cache`, `dot`), by name:
    /// each front end calls it before generating from a checkpoint.
    pub fn check_checkpoint(&self) -> Result<()> {
        let set: Vec<&str> = [
            ("`kv_cache`", self.kv_cache.is_some()),
            ("`dot`", self.dot.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .collect();
        if set.is_empty() {
            return Ok(());
        }
        Err(crate::data::invalid(format!(
            "{} {} to a pretrained `model` only (a checkpoint's GPT has no KV cache and no \
             quantised weights): leave {} out",
            set.join(" and "),
            if set.len() == 1 { "applies" } else { "apply" },
            if set.len() == 1 { "it" } else { "them" },
        )))
    }
}

/// Generates as `job` says with the model `open` gives (called once the job is checked).
/// When `emit` is given (streaming) it receives the prompt once every check has passed, then
/// each new piece of text as soon as it is complete. A model whose cache stores every
/// position (Llama) must hold the prompt and `max_new_tokens` together; a GPT slides over
/// its last `context` tokens.
pub fn run<M: CausalLm>(
    job: &GenerateJob,
    open: impl FnOnce() -> Result<TextModel<M>>,
    emit: Option<&mut TextSink<'_>>,
) -> Result<GenerateReport> {
    run_until(job, open, emit, &AtomicBool::new(false))
}

/// [`run`] that stops with an error at the first token after `interrupt` becomes true
/// ([`super::generate::generate_text_until`]).
pub fn run_until<M: CausalLm>(
    job: &GenerateJob,
    open: impl FnOnce() -> Result<TextModel<M>>,
    mut emit: Option<&mut TextSink<'_>>,
    interrupt: &AtomicBool,
) -> Result<GenerateReport> {
    job.validate()?;
    let mut lm = open()?;
    let prompt = lm.prompt_ids(&job.prompt)?;
    let new = job.options.max_new_tokens;
    if let Some(max) = lm.model.cache_limit()
        && prompt.len().saturating_add(new) > max
    {
        return Err(crate::data::invalid(format!(
            "prompt ({} tokens) + `max_new_tokens` {new} exceed the model's context of {max}",
            prompt.len()
        )));
    }
    let stop = lm.stop_ids();
    if let Some(emit) = emit.as_mut() {
        emit(&job.prompt)?;
    }
    let TextModel {
        model, tokenizer, ..
    } = &mut lm;
    let detok = |ids: &[u32]| tokenizer.decode(ids);
    generate_text_until(
        model,
        &job.prompt,
        &prompt,
        job.options,
        &stop,
        &detok,
        emit,
        interrupt,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::generate::MAX_NEW_TOKENS;

    fn message(r: Result<()>) -> String {
        crate::error::one_line(&r.unwrap_err())
    }

    /// A token budget beyond the cap is refused before any model is opened.
    #[test]
    fn max_new_tokens_is_capped() {
        let mut job = GenerateJob::default();
        job.options.max_new_tokens = MAX_NEW_TOKENS;
        job.validate().unwrap();
        job.options.max_new_tokens = MAX_NEW_TOKENS + 1;
        assert!(message(job.validate()).contains("`max_new_tokens` 1048577 is more than"));
        job.options.max_new_tokens = usize::MAX;
        assert!(message(job.validate()).contains("`max_new_tokens`"));
    }

    /// A checkpoint refuses the pretrained model's settings by name, not silently.
    #[test]
    fn a_checkpoint_refuses_kv_cache_and_dot() {
        GenerateJob::default().check_checkpoint().unwrap();
        let kv = GenerateJob {
            kv_cache: Some(KvDtype::F32),
            ..GenerateJob::default()
        };
        let e = message(kv.check_checkpoint());
        assert!(
            e.starts_with("`kv_cache` applies to a pretrained `model` only"),
            "{e}"
        );
        let both = GenerateJob {
            dot: Some(MatvecInput::F32),
            ..kv
        };
        let e = message(both.check_checkpoint());
        assert!(e.starts_with("`kv_cache` and `dot` apply"), "{e}");
        assert_eq!(both.kv_cache(), KvDtype::F32);
        assert_eq!(
            GenerateJob::default().kv_cache(),
            GenerateJob::DEFAULT_KV_CACHE
        );
    }
}
