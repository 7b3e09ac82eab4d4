//! Training options: everything besides the model configuration that decides a run. Stored
//! in every checkpoint, so a resumed run continues with exactly the same choices.

use super::adamw::AdamWConfig;
use super::invalid;
use super::schedule::Schedule;
use crate::Result;
use crate::data::TokenizerKind;

/// The most batches one loss estimate averages (`--eval-iters`): 10,000 batches estimate a
/// loss to about 1% of its batch-to-batch spread, and a larger number only makes every
/// evaluation take longer (a huge one would never finish).
pub const MAX_EVAL_ITERS: usize = 10_000;

/// The options of one training run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainOptions {
    /// Optimizer steps in the whole run.
    pub steps: usize,
    /// Steps the cosine decays over; later steps run at `min_lr` (`None`: `steps`). A resumed
    /// run that extends `steps` pins it to the first run's, so the rate never rises again.
    /// Left out of the file form when `None`: checkpoints written before the field load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr_decay_steps: Option<usize>,
    /// Sequences per batch (`B`).
    pub batch: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Learning rate at the end of the cosine decay.
    pub min_lr: f64,
    /// Linear warm-up steps.
    pub warmup: usize,
    /// Global gradient-norm clip (0: none).
    pub grad_clip: f64,
    /// Evaluate (and checkpoint) every this many steps, and at the end.
    pub eval_every: usize,
    /// Batches averaged per loss estimate.
    pub eval_iters: usize,
    /// Seed of batch sampling and dropout (model initialisation has its own seed).
    pub seed: u64,
    /// AdamW hyper-parameters.
    pub adamw: AdamWConfig,
    /// Train `W_Q, W_K` (and their biases) for the steps before this one, then freeze them:
    /// from step `freeze_qk_after` on they get no update, no weight decay and no AdamW state
    /// change, and their gradients count toward no clipping norm (`train::qk_freeze`).
    /// `None` (not written): Q/K train to the end, the form of checkpoints written before the
    /// field existed. Variants whose Q/K are frozen anyway are unaffected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_qk_after: Option<usize>,
}

/// The model `orthoformer train` and `compare` build when no preset or config is named:
/// [`DEFAULT_PRESET`] with context [`DEFAULT_CONTEXT`] (4 layers, 4 heads, width 128, character
/// vocabulary), which trains in minutes on 2 cores.
pub const DEFAULT_PRESET: &str = "shakespeare-char";

/// Context of the default model (a named preset keeps its own).
pub const DEFAULT_CONTEXT: usize = 64;

/// Default vocabulary of the byte-level BPE tokenizer.
pub const DEFAULT_BPE_VOCAB: usize = 512;

/// The tokenizer a run trains: `kind` (default character level) and the BPE vocabulary
/// (`vocab_size`, default [`DEFAULT_BPE_VOCAB`]); a vocabulary size with the character
/// tokenizer is refused (its vocabulary is the text's characters).
pub fn tokenizer_choice(
    kind: Option<TokenizerKind>,
    vocab_size: Option<usize>,
) -> crate::Result<(TokenizerKind, usize)> {
    let kind = kind.unwrap_or(TokenizerKind::Char);
    if kind == TokenizerKind::Char && vocab_size.is_some() {
        return Err(super::invalid(
            "`vocab_size` applies to `tokenizer` bpe only (the character vocabulary is the \
             text's characters)",
        ));
    }
    Ok((kind, vocab_size.unwrap_or(DEFAULT_BPE_VOCAB)))
}

impl Default for TrainOptions {
    /// The defaults of `orthoformer train` and `compare` (the only place they are written):
    /// 600 steps of 16 sequences at peak lr 2e-3 (30 warm-up steps, cosine to 2e-4), clip 1.0,
    /// evaluation every 50 steps on 8 batches, AdamW as [`AdamWConfig::default`]; the Python package's
    /// `python -m orthoformer.train` reads them from here.
    fn default() -> Self {
        TrainOptions {
            steps: 600,
            lr_decay_steps: None,
            batch: 16,
            lr: 2e-3,
            min_lr: 2e-4,
            warmup: 30,
            grad_clip: 1.0,
            eval_every: 50,
            eval_iters: 8,
            seed: 0,
            adamw: AdamWConfig::default(),
            freeze_qk_after: None,
        }
    }
}

impl TrainOptions {
    /// Refuses an option that would do nothing for the model `cfg` (recorded in its state
    /// while the run is bit-identical to one without it): `freeze_qk_after` for a model that
    /// trains no `W_Q, W_K` in any layer (its variant's are frozen, tied, the identity or a
    /// transform in every layer). A single run makes this check; `compare` applies its shared
    /// options to every variant.
    pub fn check_applies(&self, cfg: &crate::model::GptConfig) -> Result<()> {
        let trains_qk = (0..cfg.n_layer).any(|l| {
            let k = cfg.layer_kind(l);
            k.q_projection().trainable() || k.k_projection().trainable()
        });
        match self.freeze_qk_after {
            Some(n) if !trains_qk => Err(invalid(format!(
                "`freeze_qk_after` {n} stops training W_Q, W_K, and {} trains them in no layer \
                 (they are frozen throughout): drop it, or use a variant with trained Q/K",
                cfg.attention.name()
            ))),
            _ => Ok(()),
        }
    }

    /// Checks every option; the error names the flag.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, why: &str| Err(invalid(format!("`{field}` {why}")));
        let a = &self.adamw;
        if self.steps == 0 {
            return bad("steps", "must be at least 1");
        }
        if self.batch == 0 {
            return bad("batch", "must be at least 1");
        }
        if let Some(d) = self.lr_decay_steps
            && (d == 0 || d < self.warmup)
        {
            return Err(invalid(format!(
                "`lr_decay_steps` {d} must be at least 1 and at least `warmup` ({}): the cosine \
                 starts when the warm-up ends",
                self.warmup
            )));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad("lr", "must be a positive number");
        }
        if !(self.min_lr.is_finite() && self.min_lr >= 0.0 && self.min_lr <= self.lr) {
            return bad("min_lr", "must be between 0 and `lr`");
        }
        if !(self.grad_clip.is_finite() && self.grad_clip >= 0.0) {
            return bad("grad_clip", "must be 0 (off) or positive");
        }
        if self.eval_every == 0 {
            return bad("eval_every", "must be at least 1");
        }
        if self.eval_iters == 0 {
            return bad("eval_iters", "must be at least 1");
        }
        if self.eval_iters > MAX_EVAL_ITERS {
            return Err(invalid(format!(
                "`eval_iters` {} is more than {MAX_EVAL_ITERS}: each evaluation would take \
                 {} batches, and the loss estimate's error shrinks only as 1/sqrt(iters); use \
                 at most {MAX_EVAL_ITERS}",
                self.eval_iters,
                self.eval_iters.saturating_mul(2)
            )));
        }
        if !(a.weight_decay.is_finite() && a.weight_decay >= 0.0) {
            return bad("weight_decay", "must be 0 or positive");
        }
        if !((0.0..1.0).contains(&a.beta1) && (0.0..1.0).contains(&a.beta2)) {
            return Err(invalid("`beta1` and `beta2` must be in [0, 1)"));
        }
        if !(a.eps.is_finite() && a.eps > 0.0) {
            return bad("eps", "must be positive");
        }
        Ok(())
    }

    /// The steps the cosine decays over: `lr_decay_steps`, or `steps` when it is not set.
    pub fn decay_steps(&self) -> usize {
        self.lr_decay_steps.unwrap_or(self.steps)
    }

    /// These options with the run extended (or shortened) to `steps`, as a resume asks: the
    /// decay horizon stays the one the run was planned with (its `steps` when none was set),
    /// so the learning rate does not jump back up when a finished run is extended. A horizon
    /// shorter than the warm-up is pinned at the warm-up, which gives the same rate at every
    /// step and keeps the options valid.
    pub fn with_steps(mut self, steps: usize) -> Self {
        if steps != self.steps && self.lr_decay_steps.is_none() {
            self.lr_decay_steps = Some(self.steps.max(self.warmup).max(1));
        }
        self.steps = steps;
        self
    }

    /// The learning-rate schedule these options describe.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            lr_max: self.lr,
            lr_min: self.min_lr,
            warmup: self.warmup,
            steps: self.decay_steps(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extending_a_run_keeps_its_decay_horizon() {
        let first = TrainOptions {
            steps: 20,
            warmup: 2,
            ..TrainOptions::default()
        };
        let longer = first.clone().with_steps(40);
        assert_eq!((longer.steps, longer.decay_steps()), (40, 20));
        let (a, b) = (first.schedule(), longer.schedule());
        for s in 0..20 {
            assert_eq!(a.lr(s), b.lr(s), "step {s}");
        }
        for s in 20..40 {
            assert_eq!(b.lr(s), first.min_lr, "step {s}");
        }
        // Unchanged steps change nothing (the file form stays the same).
        assert_eq!(first.clone().with_steps(20), first);
        // A horizon set explicitly is kept as it is.
        let set = TrainOptions {
            lr_decay_steps: Some(30),
            ..first.clone()
        };
        assert_eq!(set.with_steps(40).decay_steps(), 30);
    }

    #[test]
    fn a_horizon_shorter_than_the_warm_up_is_pinned_at_it_with_the_same_rates() {
        let first = TrainOptions {
            steps: 1,
            ..TrainOptions::default()
        };
        let longer = first.clone().with_steps(100);
        assert!(longer.validate().is_ok());
        for s in 0..100 {
            assert_eq!(first.schedule().lr(s), longer.schedule().lr(s), "step {s}");
        }
    }

    #[test]
    fn checkpoints_without_the_field_load_and_a_bad_horizon_is_refused() {
        let mut v = serde_json::to_value(TrainOptions::default()).unwrap();
        assert!(v.get("lr_decay_steps").is_none());
        v["steps"] = 50.into();
        let old: TrainOptions = serde_json::from_value(v).unwrap();
        assert_eq!(old.decay_steps(), 50);
        for d in [0, 29] {
            let bad = TrainOptions {
                lr_decay_steps: Some(d),
                ..TrainOptions::default()
            };
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains("`lr_decay_steps`") && !e.contains('\n'), "{e}");
        }
    }
}
