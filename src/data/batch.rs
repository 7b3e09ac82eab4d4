//! Seeded batch sampling: each batch is `B` windows of `T + 1` tokens at uniformly random
//! offsets (with replacement, like nanoGPT's `get_batch`). Inputs are the first `T` tokens of
//! a window, targets the last `T`. The generator's position can be saved and restored, so a
//! resumed run draws exactly the batches the uninterrupted run would have.

use rand::Rng as _;

use crate::init::rng::{Rng, seeded};

/// Draws batches from one token sequence.
#[derive(Debug, Clone)]
pub struct BatchSampler {
    rng: Rng,
    seed: u64,
}

/// One batch, row-major `(B, T)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Input tokens `(B, T)`.
    pub inputs: Vec<u32>,
    /// Target tokens `(B, T)`: the input shifted left by one.
    pub targets: Vec<u32>,
}

impl BatchSampler {
    /// A sampler seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        BatchSampler {
            rng: seeded(seed),
            seed,
        }
    }

    /// A sampler restored at `word_pos` (from [`BatchSampler::word_pos`]).
    pub fn restore(seed: u64, word_pos: u128) -> Self {
        let mut rng = seeded(seed);
        rng.set_word_pos(word_pos);
        BatchSampler { rng, seed }
    }

    /// The seed it was created with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The generator's position in its stream: with the seed, its whole state.
    pub fn word_pos(&self) -> u128 {
        self.rng.get_word_pos()
    }

    /// Draws `b` windows of `t + 1` tokens from `tokens` (which must hold at least `t + 1`).
    pub fn next_batch(&mut self, tokens: &[u32], b: usize, t: usize) -> Batch {
        assert!(tokens.len() > t, "BatchSampler: fewer than t + 1 tokens");
        let last_start = tokens.len() - t - 1;
        let mut inputs = Vec::with_capacity(b * t);
        let mut targets = Vec::with_capacity(b * t);
        for _ in 0..b {
            let o = self.rng.random_range(0..=last_start);
            inputs.extend_from_slice(&tokens[o..o + t]);
            targets.extend_from_slice(&tokens[o + 1..o + t + 1]);
        }
        Batch { inputs, targets }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_shifted_windows_and_reproducible() {
        let tokens: Vec<u32> = (0..50).collect();
        let mut s = BatchSampler::new(7);
        let a = s.next_batch(&tokens, 3, 4);
        for r in 0..3 {
            let row = &a.inputs[r * 4..r * 4 + 4];
            let tgt = &a.targets[r * 4..r * 4 + 4];
            for i in 0..4 {
                assert_eq!(tgt[i], row[i] + 1);
            }
        }
        let pos = s.word_pos();
        let b = s.next_batch(&tokens, 3, 4);
        assert_eq!(BatchSampler::new(7).next_batch(&tokens, 3, 4), a);
        assert_eq!(BatchSampler::restore(7, pos).next_batch(&tokens, 3, 4), b);
        assert_ne!(a, b);
    }

    #[test]
    fn offsets_cover_the_range() {
        // Every start offset of a 10-token text with t = 3 (0..=6) is drawn.
        let tokens: Vec<u32> = (0..10).collect();
        let mut s = BatchSampler::new(1);
        let batch = s.next_batch(&tokens, 500, 3);
        let mut seen = [0usize; 7];
        for r in 0..500 {
            seen[batch.inputs[r * 3] as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 40), "{seen:?}");
    }
}
