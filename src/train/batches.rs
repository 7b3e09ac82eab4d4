//! Where the training loop's batches come from. The loop asks a [`Batches`] source for the
//! next `(B, T)` batch and stores its position in the checkpoint; the text sampler
//! ([`TextBatches`]) is one source, MQAR's task generator another
//! (`analysis::mqar::feed`).

use super::run_state::RunState;
use crate::Result;
use crate::data::BatchSampler;
use crate::data::batch::Batch;

/// A resumable stream of training batches.
pub trait Batches {
    /// The next batch of `b` rows of `t` tokens (inputs and targets, row-major).
    fn next_batch(&mut self, b: usize, t: usize) -> Result<Batch>;
    /// The stream's position, kept in [`RunState::sampler_pos`]: a source rebuilt at this
    /// position draws exactly the batches this one would draw next.
    fn position(&self) -> u128;
}

/// Random windows of a token sequence (the text training split), drawn by a seeded
/// [`BatchSampler`] whose generator position is the stream's position.
pub struct TextBatches<'a> {
    tokens: &'a [u32],
    sampler: BatchSampler,
}

impl<'a> TextBatches<'a> {
    /// The stream over `tokens` seeded by `seed` (the run's `options.seed`), continued from
    /// `state.sampler_pos` (0 for a fresh run).
    pub fn resume(tokens: &'a [u32], seed: u64, state: &RunState) -> Self {
        TextBatches {
            tokens,
            sampler: BatchSampler::restore(seed, state.sampler_pos),
        }
    }
}

impl Batches for TextBatches<'_> {
    fn next_batch(&mut self, b: usize, t: usize) -> Result<Batch> {
        Ok(self.sampler.next_batch(self.tokens, b, t))
    }

    fn position(&self) -> u128 {
        self.sampler.word_pos()
    }
}
