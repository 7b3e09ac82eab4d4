//! The evaluation behind each of the training loop's metrics records. The loop times the
//! steps and fills the record; an [`Evaluate`] says what the model's train and validation
//! losses are at that point. Text runs use [`TextEval`] (fixed batches of both splits);
//! MQAR scores its masked loss on held-out examples (`analysis::mqar::feed`).

use super::model_api::Trainable;
use super::options::TrainOptions;
use crate::Result;
use crate::data::{BatchSampler, Split};

/// Offset of the evaluation sampler's seed from the training seed: evaluation draws the same
/// batches at every evaluation and never disturbs the training batches. Public so other
/// trainers (the Python package's data-parallel one) evaluate on the same batches.
pub const EVAL_SEED_OFFSET: u64 = 0x0e7a_15ee_d000_0001;

/// Measures a model for a metrics record.
pub trait Evaluate<M> {
    /// `(train loss, validation loss)` of `model` now, with batches of `b` rows of `t`
    /// tokens (no dropout, no gradients). Must not change what training does next.
    fn losses(&mut self, model: &mut M, b: usize, t: usize) -> Result<(f32, f32)>;
}

/// Mean loss on the same `eval_iters` batches of each text split at every evaluation.
pub struct TextEval<'a> {
    split: &'a Split,
    seed: u64,
    iters: usize,
}

impl<'a> TextEval<'a> {
    /// The evaluation of a run with `opts` on `split`: its batches are drawn with the seed
    /// `opts.seed + EVAL_SEED_OFFSET`, `opts.eval_iters` of them per split.
    pub fn new(split: &'a Split, opts: &TrainOptions) -> Self {
        TextEval {
            split,
            seed: opts.seed.wrapping_add(EVAL_SEED_OFFSET),
            iters: opts.eval_iters,
        }
    }
}

impl<M: Trainable> Evaluate<M> for TextEval<'_> {
    fn losses(&mut self, model: &mut M, b: usize, t: usize) -> Result<(f32, f32)> {
        let (split, iters, seed) = (self.split, self.iters, self.seed);
        let train = estimate_loss(model, &split.train, b, t, iters, seed)?;
        let val = estimate_loss(model, &split.val, b, t, iters, seed)?;
        Ok((train, val))
    }
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
