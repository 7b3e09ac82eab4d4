//! The one evaluation of a causal language model on a text: the mean negative log-likelihood
//! of its tokens, perplexity, and bits per unit of text. It serves this crate's GPT (`eval
//! --checkpoint`, compare's final loss) and pretrained Llama models (`eval --model`, the
//! rotation check, the quantisation study, the benchmark) alike, through [`CausalLm`].
//!
//! The text is cut into windows ([`windows`]) of `window` inputs advancing by `stride`; each
//! window scores only the targets no earlier window scored, so every token after the first is
//! scored exactly once. `stride == window` is the non-overlapping evaluation; the Hugging Face
//! sliding-window recipe is [`EvalOptions::sliding`]. Windows of one length are handed to the
//! model in batches ([`CausalLm::score_windows`]), which a model may run in one forward.

pub(crate) mod gpt;
pub mod induction;
pub(crate) mod options;
pub mod positions;
pub(crate) mod report;
pub mod score;
pub mod windows;

use std::ops::Range;

pub use induction::{InductionOptions, InductionReport};
pub use options::EvalOptions;
pub use positions::{PositionLoss, evaluate_by_position};
pub use report::{EvalReport, UnitReport};
pub use windows::Window;

use crate::infer::causal_lm::CausalLm;
use crate::model::ModelError;

/// Receives the logits of a window's scored rows (`rows x V`, row-major) with the text
/// positions of their targets.
pub type LogitsSink<'a> = dyn FnMut(&[f32], Range<usize>) + 'a;

/// Evaluates `model` on `tokens`. `progress(scored)` is called after each batch with the
/// tokens scored so far (of `tokens.len() − 1` in all, fewer under `max_batches`).
pub fn evaluate<M: CausalLm>(
    model: &mut M,
    tokens: &[u32],
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize),
) -> crate::Result<EvalReport> {
    run(model, tokens, options, progress, None)
}

/// [`evaluate`], handing every window's scored logits to `logits` as well (to compare two
/// models row by row).
pub fn evaluate_logits<M: CausalLm>(
    model: &mut M,
    tokens: &[u32],
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize),
    logits: &mut LogitsSink<'_>,
) -> crate::Result<EvalReport> {
    run(model, tokens, options, progress, Some(logits))
}

fn run<M: CausalLm>(
    model: &mut M,
    tokens: &[u32],
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize),
    mut logits: Option<&mut LogitsSink<'_>>,
) -> crate::Result<EvalReport> {
    let (window, stride) = options.resolve(model.context())?;
    if tokens.len() < 2 {
        let msg = format!(
            "{} tokens: a text needs at least 2 to score one",
            tokens.len()
        );
        return Err(ModelError::Eval(msg).into());
    }
    let all = windows::plan(tokens.len(), window, stride);
    let mut batches = windows::batches(&all, options.batch);
    if let Some(m) = options.max_batches {
        batches.truncate(m);
    }
    let mut cache = model.new_cache(window)?;
    let (mut nll, mut scored, mut count) = (0.0f64, 0usize, 0usize);
    for b in batches {
        let ws = &all[b];
        nll += model.score_windows(tokens, ws, &mut cache, logits.as_deref_mut())?;
        scored += ws.iter().map(Window::scored).sum::<usize>();
        count += ws.len();
        progress(scored);
    }
    let loss = nll / scored as f64;
    Ok(EvalReport {
        loss,
        perplexity: loss.exp(),
        tokens: scored,
        window,
        stride,
        windows: count,
        per_unit: None,
    })
}
