//! The MQAR experiment: for every (setting, width, attention variant) a 2-layer GPT is trained
//! on freshly generated MQAR batches with AdamW (warm-up + cosine, gradient clipping) at each
//! learning rate of a small sweep, scored on held-out examples, and the best learning rate
//! kept, as Zoology does. Only the queried positions enter the loss and the accuracy.

use crate::init::rng::mix64 as mix;
use serde::Serialize;

use super::generator::MqarTask;
use super::score::count_correct;
use crate::init::orthogonal::OrthoMethod;
use crate::model::{AttentionKind, Gpt, GptConfig, IGNORE, NormPlacement};
use crate::train::adamw::{AdamW, AdamWConfig, groups_from};
use crate::train::clip::clip_grad_norm;
use crate::train::schedule::Schedule;

pub use crate::train::progress::{Progress, Silent};

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
}

/// Result of one training run (one learning rate).
#[derive(Clone, Debug, Serialize)]
pub struct LrRun {
    /// Peak learning rate.
    pub lr: f64,
    /// Held-out accuracy on queried positions, in `[0, 1]`.
    pub accuracy: f64,
    /// Masked loss averaged over the last 10% of steps.
    pub final_loss: f32,
    /// Wall-clock seconds.
    pub seconds: f64,
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
            frozen_method: OrthoMethod::Qr,
            frozen_seed: self.seed,
        }
    }

    /// Runs the whole grid, reporting each run's start and each optimizer step to `progress`.
    pub fn run(&self, progress: &mut dyn Progress) -> crate::Result<Vec<MqarCell>> {
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
                    let best = runs
                        .iter()
                        .max_by(|a, b| a.accuracy.total_cmp(&b.accuracy))
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

    /// Trains one model at peak learning rate `lr` and scores it; returns the run and the
    /// number of trainable parameters.
    pub fn train_one(
        &self,
        task: &MqarTask,
        cfg: GptConfig,
        lr: f64,
        progress: &mut dyn Progress,
    ) -> crate::Result<(LrRun, usize)> {
        let start = std::time::Instant::now();
        let (b, t) = (self.batch, task.seq_len);
        let mut model = Gpt::new(cfg, self.seed)?;
        let parts: Vec<(usize, usize, bool)> = model
            .params()
            .tensors
            .iter()
            .map(|x| (x.offset, x.numel(), x.decay))
            .collect();
        let n = model.params().data.len();
        let groups = groups_from(&parts, n)?;
        let adam_cfg = AdamWConfig {
            weight_decay: self.weight_decay,
            ..AdamWConfig::default()
        };
        let mut opt = AdamW::new(adam_cfg, n);
        let schedule = Schedule {
            lr_max: lr,
            lr_min: lr * 0.1,
            warmup: (self.steps / 10).max(1),
            steps: self.steps,
        };
        let tail = (self.steps / 10).max(1);
        let mut tail_loss = 0.0f64;
        for step in 0..self.steps {
            let batch = task.generate(b, data_seed(self.seed, step as u64))?;
            model.zero_grad();
            let loss = model.forward_backward_masked(&batch.inputs, &batch.targets, b, t)?;
            if step + tail >= self.steps {
                tail_loss += loss as f64;
            }
            let store = model.params_mut();
            clip_grad_norm(&mut store.grad, 1.0);
            let lr_now = schedule.lr(step);
            opt.step(&mut store.data, &store.grad, &groups, lr_now);
            progress.step(step + 1, loss, lr_now);
        }
        let accuracy = self.evaluate(&mut model, task)?;
        let run = LrRun {
            lr,
            accuracy,
            final_loss: (tail_loss / tail as f64) as f32,
            seconds: start.elapsed().as_secs_f64(),
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

/// Seed of training batch `step` (SplitMix-style mixing keeps streams apart).
fn data_seed(seed: u64, step: u64) -> u64 {
    mix(seed ^ 0x5EED_DA7A) ^ mix(step.wrapping_add(1))
}

/// Seed of evaluation chunk `chunk`, disjoint from training's by a different salt.
fn eval_seed(seed: u64, chunk: u64) -> u64 {
    mix(seed ^ 0xE7A1_0000_0000) ^ mix(chunk.wrapping_add(0x1_0000_0000))
}
