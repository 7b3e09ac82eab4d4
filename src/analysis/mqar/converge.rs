//! MQAR trained until held-out accuracy plateaus (`orthoformer mqar --until-plateau`): one
//! run is a (setting, width, attention variant, learning rate, seed) trained by the one
//! training loop in chunks of `eval_every` steps, scored on the held-out examples after each
//! chunk and stopped by a [`StopRule`] (solved, plateau, step budget, or diverged).
//!
//! The seed sets the training batches, the model's initialisation and the frozen draws, so
//! runs of different variants at one seed are paired as `compare` pairs them. The recipe is
//! the fixed-step command's ([`MqarPlan::options`]) planned over `max_steps`: warm-up over a
//! tenth of them, cosine to a tenth of the peak at `max_steps`; a run that stops earlier
//! stops part way down the cosine. Training in chunks is the same run bit for bit as training
//! in one go: the loop's state carries over and scoring does not touch the model.

use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::feed::{HeldOut, MqarBatches};
use super::generator::MqarTask;
use super::masked::MaskedGpt;
use super::plateau::{CurvePoint, StopReason, StopRule, Tracker, first_reaching};
use super::run::MqarPlan;
use crate::model::{AttentionKind, Gpt, Position, Temperature};
use crate::train::{Limits, Observer, RunState, Silent, TrainError, train_on};

/// A grid trained until it plateaus: the fixed-step grid (its `steps` and `seed` unused),
/// the paired seeds and the stopping rule.
#[derive(Clone, Debug, Serialize)]
pub struct ConvergePlan {
    /// Settings, widths, variants, learning rates, batch, model and task shape.
    pub grid: MqarPlan,
    /// Seeds; each run's data, initialisation and frozen draws.
    pub seeds: Vec<u64>,
    /// When a run stops.
    pub rule: StopRule,
}

/// Which run a result belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunKey {
    /// Sequence length `T`.
    pub seq_len: usize,
    /// Key-value pairs `P`.
    pub kv_pairs: usize,
    /// Model width.
    pub width: usize,
    /// Attention variant.
    pub variant: AttentionKind,
    /// Peak learning rate.
    pub lr: f64,
    /// Seed of data, initialisation and frozen draws.
    pub seed: u64,
}

/// Everything besides the [`RunKey`] that decides a run's result (a resumed grid reuses a
/// finished run only when these agree).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Examples per step.
    pub batch: usize,
    /// Held-out examples scored at each evaluation.
    pub eval_examples: usize,
    /// Head width.
    pub head_dim: usize,
    /// Layers.
    pub layers: usize,
    /// Vocabulary of the task and the model.
    pub vocab: usize,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Position encoding.
    pub position: Position,
    /// Attention-score temperature.
    pub temperature: Temperature,
    /// The stopping rule.
    pub rule: StopRule,
}

/// The result of one run (also its file, `runs/<name>.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConvergeRun {
    /// Which run.
    pub key: RunKey,
    /// What it was trained with.
    pub budget: Budget,
    /// Heads of the model.
    pub heads: usize,
    /// Trainable parameters.
    pub trainable_params: usize,
    /// Every held-out evaluation, in order.
    pub curve: Vec<CurvePoint>,
    /// Step of the first evaluation at or above 90% (`None`: not reached).
    pub steps_to_90: Option<usize>,
    /// Step of the first evaluation at or above 99% (`None`: not reached).
    pub steps_to_99: Option<usize>,
    /// Accuracy at the last evaluation (0 for a diverged run, as the fixed-step sweep counts it).
    pub final_accuracy: f64,
    /// Best accuracy of any evaluation.
    pub best_accuracy: f64,
    /// Optimizer steps trained.
    pub steps: usize,
    /// Why it stopped.
    pub stopped: StopReason,
    /// For a diverged run: at which step and what became non-finite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Wall-clock seconds (training and evaluations).
    pub seconds: f64,
}

/// What a grid run shows while it trains (every method does nothing by default).
pub trait ConvergeObserver {
    /// A run starts: its label and its step budget.
    fn start(&mut self, _label: &str, _max_steps: usize) {}
    /// After each optimizer step (1-based).
    fn step(&mut self, _step: usize) {}
    /// After each held-out evaluation, with the best accuracy so far.
    fn evaluated(&mut self, _label: &str, _point: &CurvePoint, _best: f64) {}
    /// A run is done (`reused`: read from its file by a resumed grid, not trained).
    fn finished(&mut self, _label: &str, _run: &ConvergeRun, _reused: bool) {}
}

impl ConvergeObserver for Silent {}

/// Passes the loop's steps on to a [`ConvergeObserver`]; nothing is checkpointed.
struct Steps<'a>(&'a mut dyn ConvergeObserver);

impl Observer<MaskedGpt> for Steps<'_> {
    fn step(&mut self, step: usize, _loss: f32, _lr: f64) {
        self.0.step(step);
    }
}

impl RunKey {
    /// How the progress and the table name the run.
    pub fn label(&self) -> String {
        format!(
            "{} d={} T={} P={} lr={:e} seed={}",
            self.variant.name(),
            self.width,
            self.seq_len,
            self.kv_pairs,
            self.lr,
            self.seed
        )
    }
}

impl ConvergePlan {
    /// Checks the plan before anything runs: the grid's own checks, the rule, and at least
    /// one seed.
    pub fn validate(&self) -> crate::Result<()> {
        self.rule.validate()?;
        if self.seeds.is_empty() {
            return Err(crate::train::invalid("`--seeds` needs at least one seed"));
        }
        MqarPlan {
            steps: self.rule.max_steps,
            ..self.grid.clone()
        }
        .validate()?;
        // After the grid's own check, which caps its runs (so their count cannot overflow).
        let max = super::sweep::MAX_RUNS;
        if self.seeds.len().saturating_mul(self.grid.runs().max(1)) > max {
            return Err(crate::train::invalid(format!(
                "`--seeds` lists {} seeds of {} runs each: more than {max} runs in all; give \
                 fewer seeds or values",
                self.seeds.len(),
                self.grid.runs()
            )));
        }
        Ok(())
    }

    /// Every run of the grid: seeds outermost, so a grid cut short has whole seeds of every
    /// variant (pairs to compare), then settings, widths, variants and learning rates.
    pub fn keys(&self) -> Vec<RunKey> {
        let g = &self.grid;
        let mut keys = Vec::new();
        for &seed in &self.seeds {
            for &(seq_len, kv_pairs) in &g.settings {
                for &width in &g.widths {
                    for &variant in &g.variants {
                        for &lr in &g.lrs {
                            keys.push(RunKey {
                                seq_len,
                                kv_pairs,
                                width,
                                variant,
                                lr,
                                seed,
                            });
                        }
                    }
                }
            }
        }
        keys
    }

    /// What every run is trained with besides its key.
    pub fn budget(&self) -> Budget {
        let g = &self.grid;
        Budget {
            batch: g.batch,
            eval_examples: g.eval_examples,
            head_dim: g.head_dim,
            layers: g.layers,
            vocab: g.vocab,
            weight_decay: g.weight_decay,
            position: g.position,
            temperature: g.temperature,
            rule: self.rule,
        }
    }

    /// Trains run `key` until the rule stops it. `stop` (Ctrl-C) ends it with
    /// [`TrainError::Interrupted`] and nothing kept; a non-finite loss or gradient ends it as
    /// [`StopReason::Diverged`].
    pub fn train_run(
        &self,
        key: RunKey,
        observer: &mut dyn ConvergeObserver,
        stop: Option<&AtomicBool>,
    ) -> crate::Result<ConvergeRun> {
        let started = std::time::Instant::now();
        let rule = self.rule;
        let plan = MqarPlan {
            seed: key.seed,
            steps: rule.max_steps,
            ..self.grid.clone()
        };
        let task = MqarTask {
            vocab_size: plan.vocab,
            ..MqarTask::new(key.seq_len, key.kv_pairs)
        };
        task.validate()?;
        let cfg = plan.model_config(key.variant, key.width, key.seq_len);
        let heads = cfg.n_head;
        let mut model = MaskedGpt(Gpt::new(cfg, key.seed)?);
        let n = model.0.params().data.len();
        let mut opts = plan.options(key.lr);
        opts.eval_every = rule.eval_every;
        let mut state = RunState::fresh(&opts, n);
        let mut batches = MqarBatches::resume(&task, key.seed, &state);
        let mut held_out = HeldOut::new(&task, plan.batch, key.seed)?;
        let mut tracker = Tracker::new(rule, opts.warmup);
        let label = key.label();
        observer.start(&label, rule.max_steps);
        let (stopped, note, steps_done) = loop {
            let limits = Limits {
                stop,
                stop_at: Some((state.step + rule.eval_every).min(rule.max_steps)),
            };
            let mut steps = Steps(observer);
            let trained = train_on(
                &mut model,
                &mut batches,
                &mut held_out,
                &opts,
                task.seq_len,
                state,
                &mut steps,
                limits,
            );
            state = match trained {
                Ok(s) => s,
                Err(crate::Error::Train(TrainError::NonFinite {
                    step, what, value, ..
                })) => {
                    let why = format!("stopped at step {step}: the {what} became {value}");
                    break (StopReason::Diverged, Some(why), step);
                }
                Err(e) => return Err(e),
            };
            let point = CurvePoint {
                step: state.step,
                accuracy: plan.evaluate(&mut model.0, &task)?,
                loss: state.metrics.last().map_or(f32::NAN, |m| m.val_loss),
            };
            let reason = tracker.push(point);
            observer.evaluated(&label, &point, tracker.best());
            if let Some(reason) = reason {
                break (reason, None, point.step);
            }
        };
        let curve = tracker.curve().to_vec();
        let final_accuracy = match stopped {
            StopReason::Diverged => 0.0,
            _ => curve.last().map_or(0.0, |p| p.accuracy),
        };
        Ok(ConvergeRun {
            key,
            budget: self.budget(),
            heads,
            trainable_params: n,
            steps_to_90: first_reaching(&curve, 0.9),
            steps_to_99: first_reaching(&curve, 0.99),
            best_accuracy: tracker.best(),
            steps: steps_done,
            curve,
            final_accuracy,
            stopped,
            note,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}
