//! The batch windows of a run on a token folder, drawn as the PyTorch trainer draws them
//! (`orthoformer.tokens.TokenSampler`): training batch `k` is `B` offsets from
//! `numpy.random.default_rng([seed, 0, k]).integers(0, n - T, size=B)` into the training
//! tokens (`n` of them), and every evaluation scores the same `eval_iters` batches of each
//! split, batch `k` of stream [`EVAL_STREAM`] (training split) or `EVAL_STREAM + 1`
//! (validation). The position kept in a checkpoint is `k`, the batches drawn so far, as the
//! PyTorch trainer keeps it: so either engine continues the other's checkpoint on the same
//! batches, and the two engines train on the same windows of the same folder.
//!
//! Runs on a text keep the library's own sampler (`data::BatchSampler`); [`Windows`] says
//! which a run uses.

use super::batches::Batches;
use super::loop_eval::Evaluate;
use super::model_api::Trainable;
use crate::Result;
use crate::data::Split;
use crate::data::batch::Batch;
use crate::data::numpy_rng::NumpyRng;

/// The evaluation streams' offset (`orthoformer.tokens.EVAL_STREAM`).
pub const EVAL_STREAM: u128 = 0x5EED_E7A1;

/// How a run draws its batch windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Windows {
    /// The library's seeded sampler (`data::BatchSampler`): runs on a text.
    #[default]
    Library,
    /// NumPy's, as the PyTorch trainer draws a token folder's (this module).
    Numpy,
}

/// Batch `k` of stream `stream`: `b` windows of `t + 1` tokens of `tokens` (which must hold
/// at least `t + 1`; `Split` checks it) at the offsets NumPy draws.
pub fn window_batch(tokens: &[u32], seed: u64, stream: u128, k: u128, b: usize, t: usize) -> Batch {
    let high = tokens.len().saturating_sub(t).max(1) as u64;
    let offsets = NumpyRng::new(&[u128::from(seed), stream, k]).integers(high, b);
    let mut inputs = Vec::with_capacity(b * t);
    let mut targets = Vec::with_capacity(b * t);
    for o in offsets {
        let o = o as usize;
        inputs.extend_from_slice(&tokens[o..o + t]);
        targets.extend_from_slice(&tokens[o + 1..o + t + 1]);
    }
    Batch { inputs, targets }
}

/// The training batches of a token-folder run, from batch `position` on.
pub struct NumpyBatches<'a> {
    tokens: &'a [u32],
    seed: u64,
    position: u128,
}

impl<'a> NumpyBatches<'a> {
    /// The stream over `tokens` seeded by `seed` (the run's `options.seed`), continued from
    /// `position` (the checkpoint's `sampler_pos`; 0 for a fresh run).
    pub fn resume(tokens: &'a [u32], seed: u64, position: u128) -> Self {
        NumpyBatches {
            tokens,
            seed,
            position,
        }
    }
}

impl Batches for NumpyBatches<'_> {
    fn next_batch(&mut self, b: usize, t: usize) -> Result<Batch> {
        let batch = window_batch(self.tokens, self.seed, 0, self.position, b, t);
        self.position += 1;
        Ok(batch)
    }

    fn position(&self) -> u128 {
        self.position
    }
}

/// Mean loss on the same `eval_iters` NumPy-drawn batches of each split at every evaluation.
pub struct NumpyEval<'a> {
    split: &'a Split,
    seed: u64,
    iters: usize,
}

impl<'a> NumpyEval<'a> {
    /// The evaluation of a run seeded by `seed` on `split`, `iters` batches per split.
    pub fn new(split: &'a Split, seed: u64, iters: usize) -> Self {
        NumpyEval { split, seed, iters }
    }

    fn loss<M: Trainable>(
        &self,
        model: &mut M,
        tokens: &[u32],
        stream: u128,
        b: usize,
        t: usize,
    ) -> Result<f32> {
        let mut sum = 0.0f64;
        for k in 0..self.iters {
            let batch = window_batch(tokens, self.seed, stream, k as u128, b, t);
            sum += model.eval_loss(&batch.inputs, &batch.targets, b, t)? as f64;
        }
        Ok((sum / self.iters.max(1) as f64) as f32)
    }
}

impl<M: Trainable> Evaluate<M> for NumpyEval<'_> {
    fn losses(&mut self, model: &mut M, b: usize, t: usize) -> Result<(f32, f32)> {
        let train = self.loss(model, &self.split.train, EVAL_STREAM, b, t)?;
        let val = self.loss(model, &self.split.val, EVAL_STREAM + 1, b, t)?;
        Ok((train, val))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The offsets `orthoformer.tokens.TokenSampler` draws (NumPy 2.4.6):
    //   np.random.default_rng([3, 0, 5]).integers(0, 100 - 4, size=3, dtype=np.int64)
    #[test]
    fn windows_are_the_token_samplers() {
        let tokens: Vec<u32> = (0..100).collect();
        let batch = window_batch(&tokens, 3, 0, 5, 3, 4);
        let starts: Vec<u32> = batch.inputs.chunks(4).map(|r| r[0]).collect();
        assert_eq!(starts, OFFSETS_3_0_5);
        for (row, tgt) in batch.inputs.chunks(4).zip(batch.targets.chunks(4)) {
            assert!(row.iter().zip(tgt).all(|(a, b)| b == &(a + 1)));
        }
        let mut s = NumpyBatches::resume(&tokens, 3, 5);
        assert_eq!(s.next_batch(3, 4).unwrap(), batch);
        assert_eq!(s.position(), 6);
    }

    const OFFSETS_3_0_5: [u32; 3] = [70, 69, 58];
}
