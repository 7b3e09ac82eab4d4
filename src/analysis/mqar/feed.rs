//! What the training loop draws and measures in an MQAR run: batch `s` of training is the
//! task generated from the seed of step `s` (fresh examples at every step, so the stream's
//! position is the step), and each metrics record scores the masked loss on one fixed
//! training batch and one held-out batch (seeds disjoint from training's).

use super::generator::{MqarBatch, MqarTask};
use crate::Result;
use crate::data::batch::Batch;
use crate::init::rng::mix64 as mix;
use crate::train::{Batches, Evaluate, RunState, Trainable};

/// Training batches of an MQAR task, one freshly generated per step.
pub struct MqarBatches<'a> {
    task: &'a MqarTask,
    seed: u64,
    step: u64,
}

impl<'a> MqarBatches<'a> {
    /// The stream of run seed `seed`, continued from `state.sampler_pos` (the next step).
    pub fn resume(task: &'a MqarTask, seed: u64, state: &RunState) -> Self {
        let step = state.sampler_pos as u64;
        MqarBatches { task, seed, step }
    }
}

impl Batches for MqarBatches<'_> {
    fn next_batch(&mut self, b: usize, _t: usize) -> Result<Batch> {
        let MqarBatch {
            inputs, targets, ..
        } = self.task.generate(b, data_seed(self.seed, self.step))?;
        self.step += 1;
        Ok(Batch { inputs, targets })
    }

    fn position(&self) -> u128 {
        self.step as u128
    }
}

/// The masked loss on the first training batch and on the first held-out batch (the first
/// chunk the accuracy is scored on): two forward passes per record, so evaluating costs
/// little next to training.
pub struct HeldOut {
    train: MqarBatch,
    val: MqarBatch,
}

impl HeldOut {
    /// The two batches of `b` examples for run seed `seed`.
    pub fn new(task: &MqarTask, b: usize, seed: u64) -> Result<Self> {
        Ok(HeldOut {
            train: task.generate(b, data_seed(seed, 0))?,
            val: task.generate(b, eval_seed(seed, 0))?,
        })
    }
}

impl<M: Trainable> Evaluate<M> for HeldOut {
    fn losses(&mut self, model: &mut M, _b: usize, _t: usize) -> Result<(f32, f32)> {
        let loss =
            |m: &mut M, x: &MqarBatch| m.eval_loss(&x.inputs, &x.targets, x.batch, x.seq_len);
        Ok((loss(model, &self.train)?, loss(model, &self.val)?))
    }
}

/// Seed of training batch `step` (SplitMix-style mixing keeps streams apart).
pub fn data_seed(seed: u64, step: u64) -> u64 {
    mix(seed ^ 0x5EED_DA7A) ^ mix(step.wrapping_add(1))
}

/// Seed of evaluation chunk `chunk`, disjoint from training's by a different salt.
pub fn eval_seed(seed: u64, chunk: u64) -> u64 {
    mix(seed ^ 0xE7A1_0000_0000) ^ mix(chunk.wrapping_add(0x1_0000_0000))
}
