//! The runs of a ladder: every (rung, seed, rate, variant), with everything an engine needs
//! to train one ([`RunSpec`], the JSON `ladder_pending` returns), and its folder
//! `OUT/<rung>/seed-<s>/lr-<lr>/<variant>/`.
//!
//! A rung trains for `⌈tokens_per_param · N / (batch · context)⌉` steps, `N` the non-embedding
//! parameters of its softmax model, the same for every variant; warm-up is
//! `round(warmup_fraction · steps)`; the curve is evaluated at step 0, every
//! `⌈steps / curve_points⌉` steps and at the last step.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::data::{self, Ranges};
use super::plan::{Architecture, LadderPlan, Recorded, Rung};
use super::shape::{self, Params};
use crate::Result;
use crate::model::AttentionKind;
use crate::train::adamw::AdamWConfig;
use crate::train::invalid;
use crate::train::options::TrainOptions;

/// AdamW's β₁ in every run.
pub const BETA1: f64 = 0.9;
/// AdamW's ε in every run.
pub const EPS: f64 = 1e-8;
/// The most steps a rung may take (a larger budget is a mistake in `tokens_per_param`).
pub const MAX_STEPS: f64 = 1e12;

/// One run: a variant at a rung, seed and rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunId<'a> {
    /// The rung.
    pub rung: &'a Rung,
    /// The seed.
    pub seed: u64,
    /// The peak learning rate.
    pub lr: f64,
    /// The variant.
    pub variant: AttentionKind,
}

/// Half-open token ranges `[start, end)` a run scores at its end: whole windows of `context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalRanges {
    /// Of `train.bin` (the held-out range's start).
    pub heldout: [usize; 2],
    /// Of `val.bin`.
    pub val: [usize; 2],
    /// Of `OUT/transfer.bin`.
    pub transfer: [usize; 2],
}

/// Everything an engine needs to train and score one run (the items `ladder_pending` lists).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    /// The rung's name.
    pub rung: String,
    /// The variant.
    pub variant: AttentionKind,
    /// The seed: batches, initialisation (`model_seed`) and frozen draws.
    pub seed: u64,
    /// Peak learning rate.
    pub lr: f64,
    /// The run's folder (its checkpoint and `result.json`).
    pub dir: String,
    /// The model family.
    pub architecture: Architecture,
    /// The model: a `GptConfig` (`gpt`) or the keyword arguments of `LlamaConfig` (`llama`).
    pub model: serde_json::Value,
    /// Seed of the initialisation.
    pub model_seed: u64,
    /// The token folder.
    pub data: String,
    /// `OUT/transfer.bin`: the transfer text's tokens, little-endian `u32`.
    pub transfer_file: String,
    /// Optimizer steps.
    pub steps: usize,
    /// Linear warm-up steps.
    pub warmup: usize,
    /// The cosine's floor.
    pub min_lr: f64,
    /// Sequences per step.
    pub batch: usize,
    /// Tokens per sequence.
    pub context: usize,
    /// AdamW (on 2-D weights).
    pub weight_decay: f64,
    /// AdamW β₁.
    pub beta1: f64,
    /// AdamW β₂.
    pub beta2: f64,
    /// AdamW ε.
    pub eps: f64,
    /// Global gradient-norm clip (0: none).
    pub grad_clip: f64,
    /// Of `train.bin`: the tokens batches are drawn from.
    pub train_range: [usize; 2],
    /// Of `train.bin`: the held-out tail.
    pub heldout_range: [usize; 2],
    /// The steps the curve is evaluated at (0 and the last included).
    pub curve_steps: Vec<usize>,
    /// Of `train.bin`: the curve's windows, the first `eval_batches · batch` whole windows of
    /// the held-out range, scored in `eval_batches` batches of `batch`.
    pub curve_range: [usize; 2],
    /// Batches per curve point.
    pub eval_batches: usize,
    /// What is scored at the end (batches of `batch` windows).
    pub final_ranges: FinalRanges,
    /// Parameter counts by the library's accounting.
    pub params: Params,
    /// Training FLOPs per step by the library's count.
    pub flops_per_step: u64,
    /// `batch · context`.
    pub tokens_per_step: u64,
    /// SHA-256 of every setting above that changes training or scoring, and of the data
    /// ([`super::fingerprint`]); a result records it.
    #[serde(default)]
    pub fingerprint: String,
}

/// The folder name of a rate: `lr-<value>` in Rust's shortest round-trip spelling (`lr-0.001`).
pub fn lr_dir(lr: f64) -> String {
    format!("lr-{lr}")
}

/// The folder of a run.
pub fn run_dir(out: &Path, rung: &str, seed: u64, lr: f64, variant: AttentionKind) -> PathBuf {
    out.join(rung)
        .join(format!("seed-{seed}"))
        .join(lr_dir(lr))
        .join(variant.name())
}

/// Every run of `plan`: rung by rung (smallest first), then seed, rate and variant.
pub fn all(plan: &LadderPlan) -> Vec<RunId<'_>> {
    let mut out = Vec::new();
    for rung in &plan.rungs {
        let mut lrs: Vec<f64> = plan
            .variants
            .iter()
            .flat_map(|&v| plan.rates(&rung.name, v))
            .collect();
        lrs.sort_by(f64::total_cmp);
        lrs.dedup();
        for &seed in &plan.seeds {
            for &lr in &lrs {
                for &variant in &plan.variants {
                    if plan.rates(&rung.name, variant).contains(&lr) {
                        out.push(RunId {
                            rung,
                            seed,
                            lr,
                            variant,
                        });
                    }
                }
            }
        }
    }
    out
}

/// The steps of `rung`: `⌈tokens_per_param · N / (batch · context)⌉`, `N` its softmax
/// model's non-embedding parameters.
pub fn steps(plan: &LadderPlan, rung: &Rung, vocab: usize) -> Result<usize> {
    let n = shape::cost(plan, rung, AttentionKind::Softmax, vocab)?
        .params
        .non_embedding;
    let per_step = (plan.batch as f64) * (plan.context as f64);
    let s = (plan.tokens_per_param * n as f64 / per_step)
        .ceil()
        .max(1.0);
    if !(s.is_finite() && s <= MAX_STEPS) {
        return Err(invalid(format!(
            "rung {} would take {s:e} steps (tokens_per_param {} × {n} parameters): lower \
             \"tokens_per_param\"",
            rung.name, plan.tokens_per_param
        )));
    }
    Ok(s as usize)
}

/// The steps between curve points: `⌈steps / curve_points⌉`.
pub fn eval_every(plan: &LadderPlan, steps: usize) -> usize {
    steps.div_ceil(plan.curve_points).max(1)
}

/// The curve's steps: 0, every [`eval_every`] steps, and the last.
pub fn curve_steps(plan: &LadderPlan, steps: usize) -> Vec<usize> {
    let every = eval_every(plan, steps);
    let mut out: Vec<usize> = (0..steps).step_by(every).collect();
    out.push(steps);
    out
}

/// The spec of run `id` in `out`.
pub fn spec(plan: &LadderPlan, out: &Path, id: RunId<'_>) -> Result<RunSpec> {
    let rec: &Recorded = plan.recorded()?;
    let vocab = rec.vocab_size;
    let steps = steps(plan, id.rung, vocab)?;
    let cost = shape::cost(plan, id.rung, id.variant, vocab)?;
    let model = match plan.architecture {
        Architecture::Gpt => {
            let cfg = shape::gpt_config(plan, id.rung, id.variant, id.seed, vocab);
            serde_json::to_value(cfg).map_err(|e| invalid(format!("serialising a model: {e}")))?
        }
        Architecture::Llama => shape::llama_config(plan, id.rung, id.variant, id.seed, vocab),
    };
    let Ranges { train, heldout } = data::ranges(plan, rec.train_tokens);
    let t = plan.context;
    let curve_len = plan.eval_batches * plan.batch * t + 1;
    let held_len = heldout.1 - heldout.0;
    let final_held = data::whole_windows(held_len, plan.eval_tokens, t);
    let mut spec = RunSpec {
        rung: id.rung.name.clone(),
        variant: id.variant,
        seed: id.seed,
        lr: id.lr,
        dir: run_dir(out, &id.rung.name, id.seed, id.lr, id.variant)
            .display()
            .to_string(),
        architecture: plan.architecture,
        model,
        model_seed: id.seed,
        data: plan.data.clone(),
        transfer_file: out.join(data::TRANSFER_FILE).display().to_string(),
        steps,
        warmup: (plan.warmup_fraction * steps as f64).round() as usize,
        min_lr: plan.min_lr_ratio * id.lr,
        batch: plan.batch,
        context: t,
        weight_decay: plan.weight_decay,
        beta1: BETA1,
        beta2: plan.beta2,
        eps: EPS,
        grad_clip: plan.grad_clip,
        train_range: [train.0, train.1],
        heldout_range: [heldout.0, heldout.1],
        curve_steps: curve_steps(plan, steps),
        curve_range: [heldout.0, heldout.0 + curve_len],
        eval_batches: plan.eval_batches,
        final_ranges: FinalRanges {
            heldout: [heldout.0, heldout.0 + final_held],
            val: [0, data::whole_windows(rec.val_tokens, plan.eval_tokens, t)],
            transfer: [
                0,
                data::whole_windows(rec.transfer_tokens, plan.eval_tokens, t),
            ],
        },
        params: cost.params,
        flops_per_step: cost.flops_per_step,
        tokens_per_step: (plan.batch as u64).saturating_mul(t as u64),
        fingerprint: String::new(),
    };
    spec.fingerprint = super::fingerprint::fingerprint(&spec, rec);
    Ok(spec)
}

impl RunSpec {
    /// The library's training options of this run (the Rust engine's; the curve decides
    /// `eval_every`, and `eval_iters` is the curve's batch count).
    pub fn train_options(&self, plan: &LadderPlan) -> TrainOptions {
        TrainOptions {
            steps: self.steps,
            lr_decay_steps: None,
            batch: self.batch,
            lr: self.lr,
            min_lr: self.min_lr,
            warmup: self.warmup,
            grad_clip: self.grad_clip,
            eval_every: eval_every(plan, self.steps),
            eval_iters: self.eval_batches,
            seed: self.seed,
            adamw: AdamWConfig {
                beta1: BETA1,
                beta2: self.beta2,
                eps: EPS,
                weight_decay: self.weight_decay,
            },
            freeze_qk_after: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(points: usize) -> LadderPlan {
        let text = format!(
            r#"{{"format": "orthoformer-ladder", "version": 1, "data": "d", "context": 16,
                "batch": 2, "tokens_per_param": 1.0, "curve_points": {points},
                "variants": ["softmax", "orthogonal"], "seeds": [0, 1],
                "rungs": [{{"name": "a", "layers": 1, "heads": 2, "width": 8}},
                          {{"name": "b", "layers": 2, "heads": 2, "width": 8}}]}}"#
        );
        LadderPlan::from_json(&text).unwrap()
    }

    #[test]
    fn steps_are_the_budget_over_the_tokens_per_step_rounded_up() {
        let p = plan(3);
        let n = shape::cost(&p, &p.rungs[0], AttentionKind::Softmax, 50)
            .unwrap()
            .params
            .non_embedding as usize;
        assert_eq!(steps(&p, &p.rungs[0], 50).unwrap(), n.div_ceil(32));
        let mut huge = p.clone();
        huge.tokens_per_param = 1e300;
        assert!(steps(&huge, &huge.rungs[0], 50).is_err());
    }

    #[test]
    fn the_curve_starts_at_zero_and_ends_at_the_last_step() {
        assert_eq!(curve_steps(&plan(3), 10), vec![0, 4, 8, 10]);
        assert_eq!(curve_steps(&plan(5), 10), vec![0, 2, 4, 6, 8, 10]);
        assert_eq!(curve_steps(&plan(20), 3), vec![0, 1, 2, 3]);
    }

    #[test]
    fn every_run_once_rung_by_rung() {
        let p = plan(3);
        let runs = all(&p);
        assert_eq!(runs.len(), 2 * 2 * 4 * 2);
        assert!(runs[..16].iter().all(|r| r.rung.name == "a"));
        let dir = run_dir(Path::new("o"), "a", 1, 3e-4, AttentionKind::Orthogonal);
        assert_eq!(dir, Path::new("o/a/seed-1/lr-0.0003/orthogonal"));
    }
}
