//! The training loop, one readable function: take the next batch, forward + backward, stop
//! on a non-finite loss or gradient, clip, AdamW step at the scheduled learning rate; every
//! `eval_every` steps (and at the end) evaluate, record metrics and hand the state to the
//! caller to checkpoint.
//!
//! The loop is the same for every task: where batches come from is a [`Batches`] source and
//! what a metrics record measures is an [`Evaluate`]. [`train`] is the text run (random
//! windows of the training split, losses on fixed batches of both splits); MQAR trains its
//! masked loss through [`train_on`] (`analysis::mqar::run`).
//!
//! Everything that decides the next step lives in [`RunState`] (step, the batch source's
//! position, AdamW moments) plus the model's parameters, so restoring those continues the
//! run bit for bit. Dropout masks are seeded by the step number.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::TrainError;
use super::adamw::groups_from;
use super::batches::{Batches, TextBatches};
use super::clip::clip_grad_norm;
use super::loop_eval::{Evaluate, TextEval};
use super::metrics::MetricRecord;
use super::model_api::Trainable;
use super::observer::Observer;
use super::options::TrainOptions;
use super::run_state::RunState;
use crate::Result;
use crate::data::Split;

pub use super::loop_eval::{EVAL_SEED_OFFSET, estimate_loss};

/// How far to go this time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits<'a> {
    /// Set by Ctrl-C: checkpoint the run in progress and stop.
    pub stop: Option<&'a AtomicBool>,
    /// Train to at most this step, then checkpoint and return (a chunk of a long run).
    pub stop_at: Option<usize>,
}

impl Limits<'_> {
    /// Refuses a chunk of no steps (`stop_at` 0), naming the field: checked by [`train_on`],
    /// and by a front end before it writes a run's folder.
    pub fn validate(&self) -> Result<()> {
        if self.stop_at == Some(0) {
            return Err(super::invalid(
                "`stop_at` must be at least 1 (the step to stop after)",
            ));
        }
        Ok(())
    }
}

/// Trains `model` on `split` until `opts.steps`, starting from `state`: [`train_on`] with
/// the split's seeded training windows (continued from `state.sampler_pos`) and the losses
/// of fixed batches of both splits (`TextEval`).
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
    state: RunState,
    observer: &mut dyn Observer<M>,
    stop: Option<&AtomicBool>,
    stop_at: Option<usize>,
) -> Result<RunState> {
    let mut batches = TextBatches::resume(&split.train, opts.seed, &state);
    let mut eval = TextEval::new(split, opts);
    let limits = Limits { stop, stop_at };
    train_on(
        model,
        &mut batches,
        &mut eval,
        opts,
        t,
        state,
        observer,
        limits,
    )
}

/// The loop itself: trains `model` on `batches` until `opts.steps`, starting from `state`
/// (whose `sampler_pos` must be where `batches` stands), and records `eval`'s losses at
/// step 0 (for a fresh run), every `opts.eval_every` steps and at the end. Stops as
/// [`train`] says; `opts.seed` is not read here (the source and the evaluation own their
/// seeds).
#[allow(clippy::too_many_arguments)]
pub fn train_on<M: Trainable>(
    model: &mut M,
    batches: &mut dyn Batches,
    eval: &mut dyn Evaluate<M>,
    opts: &TrainOptions,
    t: usize,
    mut state: RunState,
    observer: &mut dyn Observer<M>,
    limits: Limits,
) -> Result<RunState> {
    opts.validate()?;
    limits.validate()?;
    let end = limits.stop_at.map_or(opts.steps, |s| s.min(opts.steps));
    let b = opts.batch;
    let n = model.params_and_grads().0.len();
    let groups = groups_from(&model.param_parts(), n)?;
    // From step `freeze_qk_after` on, W_Q and W_K leave the update (`TrainOptions`).
    let qk = model.qk_parts();
    let groups_after_freeze: Vec<_> = groups
        .iter()
        .filter(|g| !qk.contains(&g.range))
        .cloned()
        .collect();
    if state.adam.m.len() != n {
        return Err(super::invalid(format!(
            "optimizer state has {} values but the model {n} parameters",
            state.adam.m.len()
        )));
    }
    let schedule = opts.schedule();
    if state.metrics.is_empty() {
        let rec = record(model, eval, (b, t), 0, opts.lr, None, None)?;
        state.metrics.push(rec);
    }
    let (mut timed_steps, mut window_secs) = (0usize, 0.0f64);
    while state.step < end {
        if limits.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            state.sampler_pos = batches.position();
            observer.eval(model, &state)?;
            return Err(TrainError::Interrupted { step: state.step }.into());
        }
        let s = state.step;
        let lr = schedule.lr(s);
        let started = Instant::now();
        let batch = batches.next_batch(b, t)?;
        model.zero_grad();
        let loss = model.forward_backward(&batch.inputs, &batch.targets, b, t, s as u64)?;
        let (params, grads) = model.params_and_grads();
        // Frozen Q/K's gradients are dropped before clipping, so the norm and the update are
        // those of a model whose Q/K were never trainable from here on; a function of the
        // step alone, so a resumed run freezes at the same step.
        let qk_frozen = opts.freeze_qk_after.is_some_and(|f| s >= f);
        if qk_frozen {
            qk.iter().for_each(|r| grads[r.clone()].fill(0.0));
        }
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
        let active = if qk_frozen {
            &groups_after_freeze
        } else {
            &groups
        };
        state.adam.step(params, grads, active, lr);
        window_secs += started.elapsed().as_secs_f64();
        timed_steps += 1;
        state.window_loss += loss as f64;
        state.window_steps += 1;
        state.step = s + 1;
        observer.step(state.step, loss, lr);
        if state.step.is_multiple_of(opts.eval_every) || state.step == opts.steps {
            let speed = (timed_steps as f64, window_secs);
            let mut rec = record(
                model,
                eval,
                (b, t),
                state.step,
                lr,
                Some(speed),
                state.last_checkpoint,
            )?;
            rec.step_loss = Some((state.window_loss / state.window_steps as f64) as f32);
            rec.grad_norm = Some(norm);
            (state.window_loss, state.window_steps) = (0.0, 0);
            state.metrics.push(rec);
            state.sampler_pos = batches.position();
            observer.eval(model, &state)?;
            state.last_checkpoint = Some(state.step);
            (timed_steps, window_secs) = (0, 0.0);
        }
    }
    state.sampler_pos = batches.position();
    if state.last_checkpoint != Some(state.step) {
        observer.eval(model, &state)?;
        state.last_checkpoint = Some(state.step);
    }
    Ok(state)
}

/// One metrics record at `step`: `eval`'s losses, the learning rate, and the throughput of
/// `speed` = (steps, seconds) timed since the previous record. A non-finite loss is
/// [`TrainError::NonFinite`]: such a record would be refused by every reader of the checkpoint
/// it goes into, so the run stops and the last good checkpoint (`last_checkpoint`) stays.
fn record<M: Trainable>(
    model: &mut M,
    eval: &mut dyn Evaluate<M>,
    (b, t): (usize, usize),
    step: usize,
    lr: f64,
    speed: Option<(f64, f64)>,
    last_checkpoint: Option<usize>,
) -> Result<MetricRecord> {
    let (train_loss, val_loss) = eval.losses(model, b, t)?;
    for (what, value) in [
        ("evaluation loss on the training split", train_loss),
        ("validation loss", val_loss),
    ] {
        if !value.is_finite() {
            return Err(TrainError::NonFinite {
                step,
                what,
                value: value as f64,
                last_checkpoint,
            }
            .into());
        }
    }
    let (tokens_per_s, ms_per_step) = match speed {
        Some((steps, secs)) if secs > 0.0 => (
            Some(steps * (b * t) as f64 / secs),
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
        peak_rss_bytes: crate::io::rss::peak_rss_bytes(),
        grad_norm: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AttentionKind, Gpt, GptConfig};

    /// `steps` steps of `cfg` on a fixed token stream, from a fresh state or `state`.
    fn run(
        model: &mut Gpt,
        opts: &TrainOptions,
        state: Option<RunState>,
        stop: Option<usize>,
    ) -> RunState {
        let tokens: Vec<u32> = (0..400u32).map(|i| (i * 7 + i / 3) % 11).collect();
        let split = Split {
            train: tokens[..300].to_vec(),
            val: tokens[300..].to_vec(),
        };
        let n = model.params().len();
        let state = state.unwrap_or_else(|| RunState::fresh(opts, n));
        let t = model.config().context;
        train(
            model,
            &split,
            opts,
            t,
            state,
            &mut super::super::Silent,
            None,
            stop,
        )
        .unwrap()
    }

    fn opts(steps: usize, freeze: Option<usize>) -> TrainOptions {
        TrainOptions {
            steps,
            batch: 2,
            warmup: 1,
            eval_every: 2,
            eval_iters: 1,
            freeze_qk_after: freeze,
            ..TrainOptions::default()
        }
    }

    fn tensor(m: &Gpt, name: &str) -> Vec<f32> {
        m.params().get(name).unwrap().to_vec()
    }

    /// Layers `frozen_layers` names keep frozen Q/K (no trained tensor); the others train
    /// theirs, which a step changes.
    #[test]
    fn only_the_chosen_layers_are_frozen() {
        let cfg = GptConfig {
            attention: AttentionKind::Orthogonal,
            frozen_layers: Some(vec![1]),
            ..GptConfig::preset("tiny").unwrap()
        };
        let mut m = Gpt::new(cfg.clone(), 1).unwrap();
        assert!(m.params().get("h.1.attn.q.weight").is_none());
        assert_eq!(m.frozen().tensors.len(), 2);
        let frozen_before: Vec<f32> = m.frozen().tensors[0].data.clone();
        let (q0, k0, v1) = (
            tensor(&m, "h.0.attn.q.weight"),
            tensor(&m, "h.0.attn.k.weight"),
            tensor(&m, "h.1.attn.v.weight"),
        );
        run(&mut m, &opts(1, None), None, None);
        assert_ne!(q0, tensor(&m, "h.0.attn.q.weight"));
        assert_ne!(k0, tensor(&m, "h.0.attn.k.weight"));
        assert_ne!(v1, tensor(&m, "h.1.attn.v.weight"));
        assert_eq!(m.frozen().tensors[0].name, "h.1.attn.q.weight");
        assert_eq!(frozen_before, m.frozen().tensors[0].data);
        assert_eq!(
            m.params().len(),
            crate::model::gpt::layout::trainable_count(&cfg)
        );
    }

    /// Q/K train before `freeze_qk_after` and stay put after it, AdamW moments included,
    /// while the rest trains on; a run stopped past the freeze and resumed ends bit for bit
    /// where the uninterrupted run does.
    #[test]
    fn q_and_k_freeze_after_the_step_and_a_resume_past_it_is_exact() {
        let cfg = GptConfig::preset("tiny").unwrap();
        let q = "h.0.attn.q.weight";
        let range = |m: &Gpt| m.params().info(q).unwrap().range();
        let mut a = Gpt::new(cfg.clone(), 3).unwrap();
        let q_init = tensor(&a, q);
        let s2 = run(&mut a, &opts(2, Some(2)), None, None);
        let q_at_freeze = tensor(&a, q);
        assert_ne!(q_init, q_at_freeze);
        let (m2, v2) = (s2.adam.m[range(&a)].to_vec(), s2.adam.v[range(&a)].to_vec());
        let fc = tensor(&a, "h.0.mlp.fc.weight");
        let s5 = run(&mut a, &opts(5, Some(2)), Some(s2), None);
        assert_eq!(q_at_freeze, tensor(&a, q));
        assert_eq!(
            (m2, v2),
            (s5.adam.m[range(&a)].to_vec(), s5.adam.v[range(&a)].to_vec())
        );
        assert_ne!(fc, tensor(&a, "h.0.mlp.fc.weight"));
        // Uninterrupted, and stopped at step 3 (past the freeze) then resumed.
        let mut whole = Gpt::new(cfg.clone(), 3).unwrap();
        let sw = run(&mut whole, &opts(5, Some(2)), None, None);
        let mut parts = Gpt::new(cfg, 3).unwrap();
        let s3 = run(&mut parts, &opts(5, Some(2)), None, Some(3));
        assert_eq!(s3.step, 3);
        let sp = run(&mut parts, &opts(5, Some(2)), Some(s3), None);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&whole.params().data), bits(&parts.params().data));
        assert_eq!(bits(&sw.adam.m), bits(&sp.adam.m));
        assert_eq!(bits(&whole.params().data), bits(&a.params().data));
    }

    #[test]
    fn a_chunk_of_no_steps_is_refused() {
        let at = |stop_at| {
            Limits {
                stop: None,
                stop_at,
            }
            .validate()
        };
        assert!(at(None).is_ok() && at(Some(1)).is_ok());
        assert!(at(Some(0)).unwrap_err().to_string().contains("`stop_at`"));
    }
}
