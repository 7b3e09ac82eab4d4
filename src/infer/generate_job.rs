//! `orthoformer generate` as one library operation: [`run`] checks a [`GenerateJob`], opens
//! the model it is handed (a checkpoint's GPT or a pretrained Llama-family model, as a
//! [`TextModel`]), turns the prompt into ids and picks the stop ids by the rules of
//! [`crate::infer::text_model`] (the same for both families), checks that prompt and
//! continuation fit the model, and generates ([`generate_text`]). The command line and the
//! Python package only parse their arguments into a job, call [`run`] and print its report,
//! so both refuse the same inputs with the same messages.
//!
//! Messages name the job's fields in backticks (`` `max_new_tokens` ``); each front end
//! writes them as its own argument names (`--max-new-tokens`, `max_new_tokens=`).

use super::generate::{GenerateReport, SampleOptions, TextSink, generate_text};
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
    /// How a pretrained model's KV cache stores keys and values (a checkpoint's GPT has no
    /// KV cache).
    pub kv_cache: KvDtype,
    /// What a pretrained model's decode multiplies quantised weights with (f32: exact).
    pub dot: MatvecInput,
}

impl Default for GenerateJob {
    /// An empty prompt, [`SampleOptions::default`], and an f16 KV cache (llama.cpp's default:
    /// half the bytes a decode step reads, each key and value rounded to f16).
    fn default() -> Self {
        GenerateJob {
            prompt: String::new(),
            options: SampleOptions::default(),
            kv_cache: KvDtype::F16,
            dot: MatvecInput::F32,
        }
    }
}

impl GenerateJob {
    /// Checks the job's own values (before any file is read).
    pub fn validate(&self) -> Result<()> {
        self.options.validate()
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
    mut emit: Option<&mut TextSink<'_>>,
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
    generate_text(
        model,
        &job.prompt,
        &prompt,
        job.options,
        &stop,
        &detok,
        emit,
    )
}
