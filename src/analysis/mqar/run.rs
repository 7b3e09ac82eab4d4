//! The MQAR experiment: for every (setting, width, attention variant) a 2-layer GPT is trained
//! on freshly generated MQAR batches by the one training loop (`train::trainer::train_on`:
//! AdamW, warm-up + cosine, gradient clipping, the stop on a non-finite loss) at each
//! learning rate of a small sweep, scored on held-out examples, and the best learning rate
//! kept, as Zoology does. Only the queried positions enter the loss and the accuracy.

use serde::Serialize;

use super::feed::{HeldOut, MqarBatches, eval_seed};
use super::generator::MqarTask;
use super::masked::MaskedGpt;
use super::score::count_correct;
use crate::init::orthogonal::OrthoMethod;
use crate::model::{AttentionKind, Gpt, GptConfig, IGNORE, NormPlacement, Position, Temperature};
use crate::train::{AdamWConfig, Limits, Observer, RunState, TrainError, TrainOptions, train_on};

/// Everything one MQAR sweep runs: the grid and the per-run budget.
#[derive(Clone, Debug, Serialize)]
pub struct MqarPlan {
    /// `(sequence length, key-value pairs)` settings.
    pub settings: Vec<(usize, usize)>,
    /// Model widths `d_model`.
    pub widths: Vec<usize>,
    /// Attention variants.
    pub variants: Vec<AttentionKind>,
    /// Peak learning rates swept; the best is kept.
    pub lrs: Vec<f64>,
    /// Optimizer steps per run.
    pub steps: usize,
    /// Examples per step.
    pub batch: usize,
    /// Held-out examples scored per run.
    pub eval_examples: usize,
    /// Head width `d_k` (heads = width / head_dim, at least 1).
    pub head_dim: usize,
    /// Layers (Zoology: 2).
    pub layers: usize,
    /// Vocabulary size of the task and the model.
    pub vocab: usize,
    /// AdamW weight decay (Zoology: 0.1).
    pub weight_decay: f64,
    /// Seed of the data, the initialisation and the frozen weights.
    pub seed: u64,
    /// How the models see positions (learned absolute embeddings or rotary).
    pub position: Position,
    /// Whether attention scores get a learned per-head temperature (softmax variants only).
    pub temperature: Temperature,
}

/// Result of one training run (one learning rate).
#[derive(Clone, Debug, Serialize)]
pub struct LrRun {
    /// Peak learning rate.
    pub lr: f64,
    /// Held-out accuracy on queried positions, in `[0, 1]`.
    pub accuracy: f64,
    /// Masked loss averaged over the last 10% of steps (the training loop's losses).
    pub final_loss: f32,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Why the run stopped before its last step (a non-finite loss or gradient; its
    /// accuracy then counts as 0 and its `final_loss` is NaN); absent when it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// One cell of the table: a variant at a width on a setting, with its best learning rate.
#[derive(Clone, Debug, Serialize)]
pub struct MqarCell {
    /// Attention variant name.
    pub variant: String,
    /// Model width.
    pub width: usize,
    /// Heads.
    pub heads: usize,
    /// Sequence length.
    pub seq_len: usize,
    /// Key-value pairs.
    pub kv_pairs: usize,
    /// Best held-out accuracy over the sweep.
    pub accuracy: f64,
    /// The learning rate that reached it.
    pub best_lr: f64,
    /// Every learning rate tried.
    pub runs: Vec<LrRun>,
    /// Trainable parameters.
    pub trainable_params: usize,
}

impl MqarPlan {
    /// Number of training runs the plan makes.
    pub fn runs(&self) -> usize {
        self.settings.len() * self.widths.len() * self.variants.len() * self.lrs.len()
    }

    /// The model a cell trains: `layers` pre-LN blocks, `d_ff = 4 · width`, no dropout.
    pub fn model_config(&self, kind: AttentionKind, width: usize, seq_len: usize) -> GptConfig {
        GptConfig {
            vocab_size: self.vocab,
            context: seq_len,
            n_layer: self.layers,
            n_head: (width / self.head_dim.max(1)).max(1),
            d_model: width,
            d_ff: 4 * width,
            attention: kind,
            norm: NormPlacement::Pre,
            attn_bias: false,
            ffn_bias: true,
            norm_bias: true,
            gelu: crate::nn::gelu::Gelu::Tanh,
            dropout: 0.0,
            frozen_method: OrthoMethod::Qr.into(),
            frozen_seed: self.seed,
            position: self.position,
            temperature: self.temperature,
            frozen_layers: None,
        }
    }

    /// Runs the whole grid, reporting each run's start and each optimizer step to `progress`
    /// (nothing is checkpointed: its `eval` is not called).
    pub fn run(&self, progress: &mut dyn Observer<Gpt>) -> crate::Result<Vec<MqarCell>> {
        let mut cells = Vec::new();
        for &(t, p) in &self.settings {
            let task = MqarTask {
                vocab_size: self.vocab,
                ..MqarTask::new(t, p)
            };
            task.validate()?;
            for &width in &self.widths {
                for &kind in &self.variants {
                    let cfg = self.model_config(kind, width, t);
                    let mut runs = Vec::new();
                    let mut params = 0;
                    for &lr in &self.lrs {
                        let label = format!("{} d={width} T={t} P={p} lr={lr:.0e}", kind.name());
                        progress.start(&label, self.steps, 0);
                        let (run, n) = self.train_one(&task, cfg.clone(), lr, progress)?;
                        params = n;
                        runs.push(run);
                    }
                    // On equal accuracy a finished run beats one that stopped (as before,
                    // the later of equals wins otherwise).
                    let key = |r: &LrRun| (r.accuracy, r.stopped.is_none());
                    let best = runs
                        .iter()
                        .max_by(|a, b| {
                            let (ka, kb) = (key(a), key(b));
                            ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1))
                        })
                        .cloned();
                    let (accuracy, best_lr) =
                        best.map(|r| (r.accuracy, r.lr)).unwrap_or((0.0, 0.0));
                    cells.push(MqarCell {
                        variant: kind.name().to_string(),
                        width,
                        heads: cfg.n_head,
                        seq_len: t,
                        kv_pairs: p,
                        accuracy,
                        best_lr,
                        runs,
                        trainable_params: params,
                    });
                }
            }
        }
        Ok(cells)
    }

    /// The training options of one run at peak learning rate `lr`: AdamW's defaults with
    /// the plan's weight decay, clip 1.0, warm-up over a tenth of the steps, cosine to
    /// `lr / 10`; evaluated only at the start and the end (the accuracy is scored after).
    pub fn options(&self, lr: f64) -> TrainOptions {
        TrainOptions {
            steps: self.steps,
            lr_decay_steps: None,
            batch: self.batch,
            lr,
            min_lr: lr * 0.1,
            warmup: (self.steps / 10).max(1),
            grad_clip: 1.0,
            eval_every: self.steps,
            eval_iters: 1,
            seed: self.seed,
            adamw: AdamWConfig {
                weight_decay: self.weight_decay,
                ..AdamWConfig::default()
            },
            freeze_qk_after: None,
        }
    }

    /// Trains one model at peak learning rate `lr` through the training loop
    /// ([`crate::train::train_on`]) and scores it; returns the run and the number of
    /// trainable parameters. A non-finite loss or gradient stops the run: it is reported in
    /// [`LrRun::stopped`] with accuracy 0, and the sweep goes on.
    pub fn train_one(
        &self,
        task: &MqarTask,
        cfg: GptConfig,
        lr: f64,
        progress: &mut dyn Observer<Gpt>,
    ) -> crate::Result<(LrRun, usize)> {
        let start = std::time::Instant::now();
        let mut model = MaskedGpt(Gpt::new(cfg, self.seed)?);
        let n = model.0.params().data.len();
        let opts = self.options(lr);
        let state = RunState::fresh(&opts, n);
        let mut batches = MqarBatches::resume(task, self.seed, &state);
        let mut held_out = HeldOut::new(task, self.batch, self.seed)?;
        let mut tail = TailLoss::new(self.steps, progress);
        let trained = train_on(
            &mut model,
            &mut batches,
            &mut held_out,
            &opts,
            task.seq_len,
            state,
            &mut tail,
            Limits::default(),
        );
        let (accuracy, final_loss, stopped) = match trained {
            Ok(_) => (self.evaluate(&mut model.0, task)?, tail.mean(), None),
            Err(crate::Error::Train(TrainError::NonFinite {
                step, what, value, ..
            })) => {
                let why = format!("stopped at step {step}: the {what} became {value}");
                (0.0, f32::NAN, Some(why))
            }
            Err(e) => return Err(e),
        };
        let run = LrRun {
            lr,
            accuracy,
            final_loss,
            seconds: start.elapsed().as_secs_f64(),
            stopped,
        };
        Ok((run, n))
    }

    /// Accuracy on `eval_examples` held-out examples (seeds disjoint from training's).
    pub fn evaluate(&self, model: &mut Gpt, task: &MqarTask) -> crate::Result<f64> {
        let (mut correct, mut scored) = (0, 0);
        let mut done = 0;
        let mut chunk = 0u64;
        while done < self.eval_examples {
            let b = self.batch.min(self.eval_examples - done).max(1);
            let batch = task.generate(b, eval_seed(self.seed, chunk))?;
            let logits = model.scored_logits(&batch.inputs, &batch.targets, b, task.seq_len)?;
            let picked: Vec<u32> = batch
                .targets
                .iter()
                .copied()
                .filter(|&x| x != IGNORE)
                .collect();
            let (c, s) = count_correct(logits, &picked, self.vocab)?;
            correct += c;
            scored += s;
            done += b;
            chunk += 1;
        }
        Ok(if scored == 0 {
            0.0
        } else {
            correct as f64 / scored as f64
        })
    }
}

/// The loop's observer in an MQAR run: passes every step on to the progress, and sums the
/// losses of the last tenth of the steps (the run's `final_loss`). Nothing is checkpointed.
struct TailLoss<'a> {
    progress: &'a mut dyn Observer<Gpt>,
    steps: usize,
    tail: usize,
    sum: f64,
}

impl<'a> TailLoss<'a> {
    fn new(steps: usize, progress: &'a mut dyn Observer<Gpt>) -> Self {
        let tail = (steps / 10).max(1);
        TailLoss {
            progress,
            steps,
            tail,
            sum: 0.0,
        }
    }

    /// Mean loss of the last `tail` steps.
    fn mean(&self) -> f32 {
        (self.sum / self.tail as f64) as f32
    }
}

impl Observer<MaskedGpt> for TailLoss<'_> {
    fn step(&mut self, step: usize, loss: f32, lr: f64) {
        if step + self.tail > self.steps {
            self.sum += loss as f64;
        }
        self.progress.step(step, loss, lr);
    }
}
