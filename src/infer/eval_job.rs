//! `orthoformer eval` as library operations: an [`EvalJob`] says which text and how much of
//! it; [`run_pretrained`] runs the sliding-window perplexity of a pretrained model on it, and
//! a checkpoint's evaluation (`train::checkpoint::eval`) runs its validation split. Both go
//! through [`timed`], the one evaluation with its progress, wall time and refusal of a
//! non-finite loss. The command line only parses its flags into a job and prints the report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::CausalLm;
use super::eval::{EvalOptions, EvalReport, evaluate};
use super::eval_report::ModelEval;
use super::text::{read_tokens, text_name};
use crate::Result;
use crate::model::llama::{KvDtype, RuntimeQuant, load_engine};
use crate::nn::qmatvec::MatvecInput;

/// A pretrained model's evaluation window when none is given (Hugging Face's `max_length`).
pub const DEFAULT_CONTEXT: usize = 256;
/// Tokens of the text a pretrained model is evaluated on when no limit is given.
pub const DEFAULT_MAX_TOKENS: usize = 2048;

/// What `orthoformer eval` measures, besides the model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvalJob {
    /// The text (UTF-8). A checkpoint defaults to the validation split of its training data,
    /// a pretrained model to the embedded TinyShakespeare.
    pub data: Option<PathBuf>,
    /// Pretrained models only: evaluate at most this many tokens [default:
    /// [`DEFAULT_MAX_TOKENS`]].
    pub max_tokens: Option<usize>,
    /// Pretrained models only: the sliding window, in tokens [default: [`DEFAULT_CONTEXT`]].
    pub context: Option<usize>,
    /// Tokens from one window to the next [default: a checkpoint's context (windows do not
    /// overlap); half of `context` for a pretrained model].
    pub stride: Option<usize>,
    /// Score only this many batches [default: the whole text].
    pub eval_iters: Option<usize>,
    /// Pretrained models only: how the KV cache stores keys and values [default: f32].
    pub kv_cache: KvDtype,
    /// Pretrained models only: the engine's run-time activation quantisation and `R3`.
    pub runtime: RuntimeQuant,
    /// Pretrained models only: what the products multiply quantised weights with [default:
    /// f32, exact]; [`MatvecInput::Q8All`] measures the perplexity of the integer dot
    /// products (that of `q8`'s decode steps). `q8` is refused: it rounds only products of one
    /// or two rows, which evaluation windows are not, so it would report f32's perplexity.
    pub dot: MatvecInput,
}

/// A bad request: the message names the job's field.
fn invalid(msg: String) -> crate::Error {
    crate::data::invalid(msg)
}

impl EvalJob {
    /// `base` (the model kind's defaults) with the stride and batch limit of the job.
    pub fn options(&self, base: EvalOptions) -> Result<EvalOptions> {
        if self.eval_iters == Some(0) {
            return Err(invalid(
                "`eval_iters` 0 scores nothing: use at least 1 (or leave it out to score the \
                 whole text)"
                    .into(),
            ));
        }
        Ok(EvalOptions {
            stride: self.stride.or(base.stride),
            max_batches: self.eval_iters.or(base.max_batches),
            ..base
        })
    }

    /// Checks the job for a pretrained model (before any file is read); returns the window
    /// and the token limit.
    pub fn validate_pretrained(&self) -> Result<(usize, usize)> {
        let context = self.context.unwrap_or(DEFAULT_CONTEXT);
        let max_tokens = self.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        if context < 2 {
            return Err(invalid(format!(
                "`context` must be at least 2 (got {context})"
            )));
        }
        if max_tokens == 0 {
            return Err(invalid("`max_tokens` must be at least 1".into()));
        }
        if self.dot == MatvecInput::Q8 {
            return Err(invalid(
                "`dot` q8 rounds only decode steps' products, and evaluation windows are not \
                 decode steps: use q8-all to measure the integer products' perplexity"
                    .into(),
            ));
        }
        if let Some(s) = self.stride
            && (s == 0 || s >= context)
        {
            return Err(invalid(format!(
                "`stride` must be 1 to `context` − 1 = {} (got {s})",
                context - 1
            )));
        }
        self.options(EvalOptions::sliding(context))?;
        Ok((context, max_tokens))
    }
}

/// The sliding-window perplexity of the pretrained model at `path` (a `.gguf` file or a
/// Hugging Face folder) on the job's text. `progress(scored, total)` counts tokens.
pub fn run_pretrained(
    path: &Path,
    job: &EvalJob,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ModelEval> {
    let (context, max_tokens) = job.validate_pretrained()?;
    let options = job.options(EvalOptions::sliding(context))?;
    let loaded = load_engine(path)?;
    if context > loaded.model.context() {
        return Err(invalid(format!(
            "`context` {context} exceeds the model's {}",
            loaded.model.context()
        )));
    }
    super::text::check_cache_fits(loaded.model.config(), context)?;
    let data = job.data.as_deref();
    let ids = read_tokens(&loaded.tokenizer, data, max_tokens)?;
    let mut model = loaded.model;
    model.kv_dtype = job.kv_cache;
    model.dot = job.dot;
    model.set_runtime(&job.runtime)?;
    let (report, seconds) = timed(&mut model, &ids, &options, progress)?;
    Ok(ModelEval {
        model: path.display().to_string(),
        data: text_name(data),
        context,
        tokens_per_second: report.tokens as f64 / seconds,
        report,
        seconds,
    })
}

/// [`evaluate`] with `progress(scored, total)` and its wall time in seconds. A NaN or
/// infinite loss is no measurement: weights holding NaN or infinity (or logits that overflow)
/// are refused, not reported.
pub fn timed<M: CausalLm>(
    model: &mut M,
    tokens: &[u32],
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(EvalReport, f64)> {
    let total = tokens.len().saturating_sub(1);
    let start = Instant::now();
    let report = evaluate(model, tokens, options, &mut |n| progress(n, total))?;
    if !report.loss.is_finite() {
        return Err(invalid(format!(
            "the loss over {} tokens is {} (the model's weights hold NaN or infinity, or its \
             logits overflow): no evaluation to report",
            report.tokens, report.loss
        )));
    }
    Ok((report, start.elapsed().as_secs_f64()))
}
