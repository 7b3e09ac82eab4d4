//! The training loop, one readable function: sample a batch, forward + backward, stop on a
//! non-finite loss or gradient, clip, AdamW step at the scheduled learning rate; every
//! `eval_every` steps (and at the end) estimate train and validation loss on fixed batches,
//! record metrics and hand the state to the caller to checkpoint.
//!
//! Everything that decides the next step lives in [`RunState`] (step, the batch sampler's
//! position, AdamW moments) plus the model's parameters, so restoring those continues the
//! run bit for bit. Dropout masks are seeded by the step number.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::TrainError;
use super::adamw::{AdamW, groups_from};
use super::clip::clip_grad_norm;
use super::metrics::MetricRecord;
use super::model_api::Trainable;
use super::options::TrainOptions;
use crate::Result;
use crate::data::{BatchSampler, Split};

/// Offset of the evaluation sampler's seed from the training seed: evaluation draws the same
/// batches at every evaluation and never disturbs the training batches. Public so other
/// trainers (the Python package's data-parallel one) evaluate on the same batches.
pub const EVAL_SEED_OFFSET: u64 = 0x0e7a_15ee_d000_0001;

/// The resumable state of a run (besides the model).
#[derive(Debug, Clone)]
pub struct RunState {
    /// Optimizer steps done.
    pub step: usize,
    /// Position of the training batch sampler.
    pub sampler_pos: u128,
    /// Optimizer state.
    pub adam: AdamW,
    /// Evaluation records so far.
    pub metrics: Vec<MetricRecord>,
    /// Step of the last checkpoint written (`None` before the first).
    pub last_checkpoint: Option<usize>,
    /// Sum of the training losses since the last record (for its `step_loss`).
    pub window_loss: f64,
    /// Steps since the last record.
    pub window_steps: usize,
}

impl RunState {
    /// The state before the first step, for `n` trainable parameters.
    pub fn fresh(opts: &TrainOptions, n: usize) -> Self {
        RunState {
            step: 0,
            sampler_pos: 0,
            adam: AdamW::new(opts.adamw, n),
            metrics: Vec::new(),
            last_checkpoint: None,
            window_loss: 0.0,
            window_steps: 0,
        }
    }
}

/// What the loop reports to its caller as it runs.
pub trait Observer<M> {
    /// After each training step: step number (1-based), its loss, learning rate.
    fn on_step(&mut self, _step: usize, _loss: f32, _lr: f64) {}
    /// After each evaluation; write a checkpoint of `model` + `state` here.
    fn on_eval(&mut self, model: &M, state: &RunState) -> Result<()>;
}

/// Trains `model` on `split` until `opts.steps`, starting from `state`.
///
/// `t` is the sequence length (at most the model's context). When `stop` becomes true the
/// loop checkpoints through `observer` and returns [`TrainError::Interrupted`]. With
/// `stop_at`, the loop checkpoints and returns normally after that many steps (the run can
/// be continued later, as if it had not stopped). A non-finite
/// loss or gradient returns [`TrainError::NonFinite`] without checkpointing, so the last good
/// checkpoint stays.
#[allow(clippy::too_many_arguments)]
pub fn train<M: Trainable>(
    model: &mut M,
    split: &Split,
    opts: &TrainOptions,
    t: usize,
    mut state: RunState,
    observer: &mut dyn Observer<M>,
    stop: Option<&AtomicBool>,
    stop_at: Option<usize>,
) -> Result<RunState> {
    opts.validate()?;
    let end = stop_at.map_or(opts.steps, |s| s.min(opts.steps));
    let b = opts.batch;
    let n = model.params_and_grads().0.len();
    let groups = groups_from(&model.param_parts(), n)?;
    if state.adam.m.len() != n {
        return Err(super::invalid(format!(
            "optimizer state has {} values but the model {n} parameters",
            state.adam.m.len()
        )));
    }
    let schedule = opts.schedule();
    let mut sampler = BatchSampler::restore(opts.seed, state.sampler_pos);
    if state.metrics.is_empty() {
        let rec = evaluate(model, split, opts, t, 0, opts.lr, None)?;
        state.metrics.push(rec);
    }
    let (mut timed_steps, mut window_secs) = (0usize, 0.0f64);
    while state.step < end {
        if stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            state.sampler_pos = sampler.word_pos();
            observer.on_eval(model, &state)?;
            return Err(TrainError::Interrupted { step: state.step }.into());
        }
        let s = state.step;
        let lr = schedule.lr(s);
        let started = Instant::now();
        let batch = sampler.next_batch(&split.train, b, t);
        model.zero_grad();
        let loss = model.forward_backward(&batch.inputs, &batch.targets, b, t, s as u64)?;
        let (params, grads) = model.params_and_grads();
        let norm = clip_grad_norm(grads, opts.grad_clip);
        if !loss.is_finite() || !norm.is_finite() {
            let (what, value) = if loss.is_finite() {
                ("gradient norm", norm)
            } else {
                ("loss", loss as f64)
            };
            return Err(TrainError::NonFinite {
                step: s + 1,
                what,
                value,
                last_checkpoint: state.last_checkpoint,
            }
            .into());
        }
        state.adam.step(params, grads, &groups, lr);
        window_secs += started.elapsed().as_secs_f64();
        timed_steps += 1;
        state.window_loss += loss as f64;
        state.window_steps += 1;
        state.step = s + 1;
        observer.on_step(state.step, loss, lr);
        if state.step.is_multiple_of(opts.eval_every) || state.step == opts.steps {
            let speed = (timed_steps as f64, window_secs);
            let mut rec = evaluate(model, split, opts, t, state.step, lr, Some(speed))?;
            rec.step_loss = Some((state.window_loss / state.window_steps as f64) as f32);
            (state.window_loss, state.window_steps) = (0.0, 0);
            state.metrics.push(rec);
            state.sampler_pos = sampler.word_pos();
            observer.on_eval(model, &state)?;
            state.last_checkpoint = Some(state.step);
            (timed_steps, window_secs) = (0, 0.0);
        }
    }
    state.sampler_pos = sampler.word_pos();
    if state.last_checkpoint != Some(state.step) {
        observer.on_eval(model, &state)?;
        state.last_checkpoint = Some(state.step);
    }
    Ok(state)
}

/// One metrics record: train and validation loss on fixed batches at `step`.
fn evaluate<M: Trainable>(
    model: &mut M,
    split: &Split,
    opts: &TrainOptions,
    t: usize,
    step: usize,
    lr: f64,
    speed: Option<(f64, f64)>,
) -> Result<MetricRecord> {
    let seed = opts.seed.wrapping_add(EVAL_SEED_OFFSET);
    let train_loss = estimate_loss(model, &split.train, opts.batch, t, opts.eval_iters, seed)?;
    let val_loss = estimate_loss(model, &split.val, opts.batch, t, opts.eval_iters, seed)?;
    let (tokens_per_s, ms_per_step) = match speed {
        Some((steps, secs)) if secs > 0.0 => (
            Some(steps * (opts.batch * t) as f64 / secs),
            Some(secs * 1e3 / steps),
        ),
        _ => (None, None),
    };
    Ok(MetricRecord {
        step,
        train_loss,
        val_loss,
        step_loss: None,
        lr,
        tokens_per_s,
        ms_per_step,
        peak_rss_bytes: super::rss::peak_rss_bytes(),
    })
}

/// Mean loss over `iters` batches of `(b, t)` drawn from `tokens` with a sampler seeded by
/// `seed` (no dropout, no gradients).
pub fn estimate_loss<M: Trainable>(
    model: &mut M,
    tokens: &[u32],
    b: usize,
    t: usize,
    iters: usize,
    seed: u64,
) -> Result<f32> {
    let mut sampler = BatchSampler::new(seed);
    let mut sum = 0.0f64;
    for _ in 0..iters {
        let batch = sampler.next_batch(tokens, b, t);
        sum += model.eval_loss(&batch.inputs, &batch.targets, b, t)? as f64;
    }
    Ok((sum / iters as f64) as f32)
}
