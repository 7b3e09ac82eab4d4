//! The comparison's answer, from its finished runs: each variant's final validation loss over
//! seeds (mean, standard deviation), its paired difference from the baseline with a 95%
//! interval and a one-sentence verdict, and the steps and seconds it needs to reach the
//! baseline's final loss.
//!
//! Final losses are on the whole validation split ([`FinalEval`]). Curves and time-to-target
//! use the evaluations made during training (`eval_iters` fixed batches of the validation
//! split, the same batches for every run), with the baseline's last point on those curves as
//! the target, so a curve and its target are the same estimate. Seconds are training-step
//! time only (no evaluation), summed from each evaluation window's mean step time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::plan::{RunId, run_key_of};
use super::sweep::{self, LrCell};
use super::{ComparePlan, run_dir_of};
use crate::Result;
use crate::model::accounting;
use crate::model::gpt::layout;
use crate::stats::{PairedInterval, first_crossing, mean, paired_interval, sample_sd};
use crate::train::checkpoint;
use crate::train::options::TrainOptions;
use crate::train::session::Prepared;

/// A finished run's loss on the whole validation split.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FinalEval {
    /// Mean cross-entropy over every non-overlapping window (nats/token).
    pub val_loss: f64,
    /// Tokens scored.
    pub val_tokens: usize,
    /// Seconds the evaluation took.
    pub seconds: f64,
    /// In a learning-rate sweep: the loss on the held-out part of the training split, on
    /// which the rates are chosen (`compare::sweep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out_loss: Option<f64>,
}

/// One evaluation during training.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CurvePoint {
    /// Optimizer steps done.
    pub step: usize,
    /// Training-step seconds up to this point (evaluations excluded).
    pub seconds: f64,
    /// Training-split loss on the evaluation batches.
    pub train_loss: f32,
    /// Validation-split loss on the evaluation batches.
    pub val_loss: f32,
}

/// One variant at one seed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SeedRun {
    /// The seed (batches, initialisation, frozen draws).
    pub seed: u64,
    /// Final loss on the whole validation split.
    pub final_val_loss: f64,
    /// Tokens it was computed on.
    pub val_tokens: usize,
    /// Mean milliseconds per training step.
    pub ms_per_step: f64,
    /// Training-step seconds of the whole run.
    pub train_seconds: f64,
    /// The evaluations during training.
    pub curve: Vec<CurvePoint>,
    /// Its checkpoint folder.
    pub checkpoint: PathBuf,
}

/// Steps and seconds to reach the target loss (`None`: not reached).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToTarget {
    /// Optimizer steps, interpolated between evaluations.
    pub steps: Option<f64>,
    /// Training-step seconds (mean over seeds at each evaluation), interpolated.
    pub seconds: Option<f64>,
}

/// A variant's paired difference from the baseline.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Difference {
    /// `variant − baseline` in nats, per seed, with its interval.
    pub nats: PairedInterval,
    /// `(variant − baseline) / baseline · 100`, per seed, with its interval.
    pub percent: PairedInterval,
    /// The per-seed percentages.
    pub per_seed_percent: Vec<f64>,
    /// The verdict in one sentence.
    pub verdict: String,
}

/// One variant over all seeds.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct VariantSummary {
    /// Attention name.
    pub attention: String,
    /// In a learning-rate sweep, the rate this variant is reported at (its best on the
    /// held-out part of the training split).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr: Option<f64>,
    /// All parameters, trainable + frozen.
    pub params_total: usize,
    /// Parameters the optimizer updates.
    pub params_trainable: usize,
    /// Frozen parameters.
    pub params_frozen: usize,
    /// Training memory in bytes (`model::accounting`).
    pub memory_bytes: usize,
    /// Mean over seeds of the milliseconds per training step.
    pub ms_per_step: f64,
    /// Training tokens per second at that step time.
    pub tokens_per_s: f64,
    /// Mean over seeds of the final whole-split validation loss.
    pub val_loss_mean: f64,
    /// Its sample standard deviation over seeds (`None` for one seed).
    pub val_loss_sd: Option<f64>,
    /// Difference from the baseline (`None` for the baseline itself).
    pub vs_baseline: Option<Difference>,
    /// Steps and seconds to the baseline's final loss.
    pub to_target: ToTarget,
    /// Every seed's figures.
    pub seeds: Vec<SeedRun>,
}

/// The whole comparison.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CompareSummary {
    /// The text.
    pub data: String,
    /// Tokenizer kind.
    pub tokenizer: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// The recipe the settings came from, if any.
    pub recipe: Option<String>,
    /// Model configuration shared by the variants (attention and frozen seed aside).
    pub model: serde_json::Value,
    /// Training options (`seed` is the first seed).
    pub options: TrainOptions,
    /// The seeds.
    pub seeds: Vec<u64>,
    /// The variant differences are measured from.
    pub baseline: String,
    /// Time-to-target's target: the baseline's mean validation loss at its last evaluation
    /// (on the evaluation batches).
    pub target_val_loss: f64,
    /// One verdict per variant other than the baseline.
    pub verdicts: Vec<String>,
    /// One entry per variant, in the plan's order.
    pub variants: Vec<VariantSummary>,
    /// In a learning-rate sweep, every variant at every rate (held-out and validation loss),
    /// the chosen rates marked; empty without a sweep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lr_sweep: Vec<LrCell>,
}

/// Summarises the finished comparison in `out`.
pub fn summarise(
    plan: &ComparePlan,
    prepared: &Prepared,
    out: &Path,
    finals: &BTreeMap<String, FinalEval>,
) -> Result<CompareSummary> {
    let vocab = prepared.tokenizer.vocab_size();
    let lr_sweep = if plan.lrs.is_empty() {
        Vec::new()
    } else {
        sweep::table(plan, finals)?
    };
    let mut variants = Vec::new();
    for &kind in &plan.attentions {
        let lr = sweep::chosen_lr(&lr_sweep, kind);
        let mut seeds = Vec::new();
        for &seed in &plan.seeds {
            let id = RunId {
                seed,
                lr,
                attention: kind,
            };
            let dir = run_dir_of(out, id);
            let fin = finals
                .get(&run_key_of(id))
                .ok_or_else(|| crate::train::invalid(format!("{}: not finished", dir.display())))?;
            let metrics = checkpoint::load(&dir)?.run.metrics;
            seeds.push(seed_run(seed, fin, &metrics, dir));
        }
        let (cfg, opts) = plan.run_spec_of(
            RunId {
                seed: plan.seeds[0],
                lr,
                attention: kind,
            },
            vocab,
        );
        let finals: Vec<f64> = seeds.iter().map(|s| s.final_val_loss).collect();
        let ms = mean(&seeds.iter().map(|s| s.ms_per_step).collect::<Vec<_>>());
        let tokens = (opts.batch * cfg.context) as f64;
        variants.push(VariantSummary {
            attention: super::variant_label(kind, &cfg, &opts),
            lr,
            params_total: layout::trainable_count(&cfg) + layout::frozen_count(&cfg),
            params_trainable: layout::trainable_count(&cfg),
            params_frozen: layout::frozen_count(&cfg),
            memory_bytes: accounting::account(&cfg, opts.batch, cfg.context)?
                .memory
                .total,
            ms_per_step: ms,
            tokens_per_s: if ms > 0.0 { tokens / ms * 1e3 } else { 0.0 },
            val_loss_mean: mean(&finals),
            val_loss_sd: Some(sample_sd(&finals)).filter(|s| s.is_finite()),
            vs_baseline: None,
            to_target: ToTarget {
                steps: None,
                seconds: None,
            },
            seeds,
        });
    }
    let base_kind = plan.baseline();
    let b = plan
        .attentions
        .iter()
        .position(|&a| a == base_kind)
        .unwrap_or(0);
    let base_label = variants[b].attention.clone();
    let (_, _, base_curve) = mean_curve(&variants[b]);
    let target = base_curve.last().copied().unwrap_or(f64::NAN);
    let base_finals: Vec<f64> = variants[b].seeds.iter().map(|s| s.final_val_loss).collect();
    let mut verdicts = Vec::new();
    for (i, v) in variants.iter_mut().enumerate() {
        let (steps, secs, val) = mean_curve(v);
        v.to_target = ToTarget {
            steps: first_crossing(&steps, &val, target),
            seconds: first_crossing(&secs, &val, target),
        };
        if i == b {
            continue;
        }
        let (mut nats, mut pct) = (Vec::new(), Vec::new());
        for (s, base) in v.seeds.iter().zip(&base_finals) {
            nats.push(s.final_val_loss - base);
            pct.push((s.final_val_loss - base) / base * 100.0);
        }
        let percent = paired_interval(&pct);
        let verdict = verdict(&v.attention, &base_label, plan.options.steps, &percent);
        verdicts.push(verdict.clone());
        v.vs_baseline = Some(Difference {
            nats: paired_interval(&nats),
            percent,
            per_seed_percent: pct,
            verdict,
        });
    }
    let mut shared = serde_json::to_value(&plan.model).unwrap_or_default();
    if let Some(obj) = shared.as_object_mut() {
        obj.remove("attention");
        obj.remove("frozen_seed");
        obj.insert("vocab_size".into(), vocab.into());
    }
    Ok(CompareSummary {
        data: plan.data.source.clone(),
        // The tokenizer run (a token folder's is its own, not the plan's kind).
        tokenizer: prepared.tokenizer.name(),
        vocab_size: vocab,
        recipe: plan.recipe.clone(),
        model: shared,
        options: TrainOptions {
            seed: plan.seeds[0],
            ..plan.options.clone()
        },
        seeds: plan.seeds.clone(),
        baseline: base_label,
        target_val_loss: target,
        verdicts,
        variants,
        lr_sweep,
    })
}

/// One run's figures from its metrics and final evaluation.
fn seed_run(
    seed: u64,
    fin: &FinalEval,
    metrics: &[crate::train::MetricRecord],
    checkpoint: PathBuf,
) -> SeedRun {
    let mut seconds = 0.0;
    let mut prev_step = 0;
    let mut curve = Vec::with_capacity(metrics.len());
    for r in metrics {
        if let Some(ms) = r.ms_per_step {
            seconds += (r.step - prev_step) as f64 * ms / 1e3;
        }
        prev_step = r.step;
        curve.push(CurvePoint {
            step: r.step,
            seconds,
            train_loss: r.train_loss,
            val_loss: r.val_loss,
        });
    }
    SeedRun {
        seed,
        final_val_loss: fin.val_loss,
        val_tokens: fin.val_tokens,
        ms_per_step: if prev_step > 0 {
            seconds * 1e3 / prev_step as f64
        } else {
            0.0
        },
        train_seconds: seconds,
        curve,
        checkpoint,
    }
}

/// The mean over seeds, at each evaluation, of (step, seconds, validation loss). Every seed
/// evaluates at the same steps; a shorter curve (never, for a finished comparison) cuts all.
pub fn mean_curve(v: &VariantSummary) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let len = v.seeds.iter().map(|s| s.curve.len()).min().unwrap_or(0);
    let avg = |f: &dyn Fn(&CurvePoint) -> f64| -> Vec<f64> {
        (0..len)
            .map(|i| mean(&v.seeds.iter().map(|s| f(&s.curve[i])).collect::<Vec<_>>()))
            .collect()
    };
    (
        avg(&|p| p.step as f64),
        avg(&|p| p.seconds),
        avg(&|p| p.val_loss as f64),
    )
}

/// One sentence on `name` against `base` at `steps` steps, from the 95% interval of the
/// per-seed percentage differences of the final validation loss.
pub fn verdict(name: &str, base: &str, steps: usize, pct: &PairedInterval) -> String {
    let seeds = if pct.n == 1 {
        "1 seed".to_string()
    } else {
        format!("{} seeds", pct.n)
    };
    match (pct.lo, pct.hi) {
        (Some(lo), Some(hi)) if lo > 0.0 => format!(
            "{name} is worse than {base} by {:.2}% [{lo:.2}%, {hi:.2}%] at {steps} steps \
             (validation loss, 95% interval over {seeds})",
            pct.mean
        ),
        (Some(lo), Some(hi)) if hi < 0.0 => format!(
            "{name} is better than {base} by {:.2}% [{:.2}%, {:.2}%] at {steps} steps \
             (validation loss, 95% interval over {seeds})",
            -pct.mean, -hi, -lo
        ),
        (Some(lo), Some(hi)) => format!(
            "no difference between {name} and {base} is detectable at {seeds} at {steps} steps \
             ({:+.2}%, 95% interval [{lo:+.2}%, {hi:+.2}%])",
            pct.mean
        ),
        _ => format!(
            "{name} vs {base}: {:+.2}% at {steps} steps on 1 seed, which gives no interval; \
             run `seeds` 2 or more",
            pct.mean
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(n: usize, mean: f64, lo: f64, hi: f64) -> PairedInterval {
        PairedInterval {
            n,
            mean,
            sd: Some(1.0),
            lo: Some(lo),
            hi: Some(hi),
        }
    }

    #[test]
    fn verdict_has_three_cases_and_one_seed() {
        let s = "softmax";
        assert_eq!(
            verdict("orthogonal", s, 600, &iv(3, 1.234, 0.5, 1.9)),
            "orthogonal is worse than softmax by 1.23% [0.50%, 1.90%] at 600 steps (validation \
             loss, 95% interval over 3 seeds)"
        );
        assert_eq!(
            verdict("orthogonal", s, 600, &iv(3, -1.0, -1.5, -0.25)),
            "orthogonal is better than softmax by 1.00% [0.25%, 1.50%] at 600 steps (validation \
             loss, 95% interval over 3 seeds)"
        );
        assert_eq!(
            verdict("linear", s, 2000, &iv(2, 0.4, -3.0, 3.8)),
            "no difference between linear and softmax is detectable at 2 seeds at 2000 steps \
             (+0.40%, 95% interval [-3.00%, +3.80%])"
        );
        let one = paired_interval(&[0.7]);
        assert!(verdict("linear", s, 10, &one).contains("1 seed, which gives no interval"));
    }
}
