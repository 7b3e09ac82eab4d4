//! The multi-query associative recall (MQAR) task of the Zoology benchmark, generated in
//! process from a seed.
//!
//! One example of length `T` holds `P` key-value pairs first (`k₁ v₁ k₂ v₂ …`, keys drawn
//! without replacement from the lower half of the vocabulary `[1, V/2)`, values from the upper
//! half `[V/2, V)`), then the rest of the sequence, where each key is queried once. Query
//! positions are `2P + 2g` for gaps `g` drawn without replacement from `[0, (T - 2P)/2)` with
//! probability `∝ (g + 1)^(a - 1)` (Zoology's power law, `a = 0.01`), so most queries come soon
//! after the pairs and a few come late. Every other position holds a uniform random token.
//! The target at a query position is the queried key's value; every other target is
//! [`IGNORE`] and is not scored (Zoology's `-100`).

use rand::Rng as _;

use super::MqarError;
use crate::init::rng::{Rng, seeded};

/// Target value of a position that is not scored (the model's own marker).
pub use crate::model::IGNORE;

/// Zoology's power-law exponent for query gaps.
pub const DEFAULT_POWER_A: f64 = 0.01;

/// Zoology's default vocabulary size for MQAR.
pub const DEFAULT_VOCAB: usize = 8192;

/// The shape of an MQAR task.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MqarTask {
    /// Vocabulary size `V` (keys in `[1, V/2)`, values in `[V/2, V)`).
    pub vocab_size: usize,
    /// Sequence length `T` (even).
    pub seq_len: usize,
    /// Key-value pairs `P` per example (`4P <= T`).
    pub kv_pairs: usize,
    /// Power-law exponent `a` of the query gaps (`0 < a <= 1`).
    pub power_a: f64,
}

/// A batch of `B` examples, each `T` tokens, row-major `(B, T)`.
#[derive(Clone, Debug, PartialEq)]
pub struct MqarBatch {
    /// Input tokens `(B, T)`.
    pub inputs: Vec<u32>,
    /// Targets `(B, T)`: the value at each query position, [`IGNORE`] elsewhere.
    pub targets: Vec<u32>,
    /// Examples `B`.
    pub batch: usize,
    /// Sequence length `T`.
    pub seq_len: usize,
}

impl MqarBatch {
    /// Number of scored positions (`B · P`).
    pub fn scored(&self) -> usize {
        self.targets.iter().filter(|&&t| t != IGNORE).count()
    }
}

impl MqarTask {
    /// A task with Zoology's defaults (vocabulary 8,192, `a = 0.01`).
    pub fn new(seq_len: usize, kv_pairs: usize) -> Self {
        Self {
            vocab_size: DEFAULT_VOCAB,
            seq_len,
            kv_pairs,
            power_a: DEFAULT_POWER_A,
        }
    }

    /// Checks the shape: `T` even, `P >= 1`, `4P <= T`, `V > T`, `P < V/2`, `0 < a <= 1`.
    pub fn validate(&self) -> Result<(), MqarError> {
        let bad = |why: String| Err(MqarError::BadTask(why));
        if self.seq_len == 0 || !self.seq_len.is_multiple_of(2) {
            return bad(format!(
                "sequence length {} must be even and > 0",
                self.seq_len
            ));
        }
        if self.kv_pairs == 0 || 4 * self.kv_pairs > self.seq_len {
            return bad(format!(
                "{} key-value pairs need 1 <= 4 x pairs <= sequence length {}",
                self.kv_pairs, self.seq_len
            ));
        }
        if self.vocab_size <= self.seq_len || self.kv_pairs >= self.vocab_size / 2 {
            return bad(format!(
                "vocabulary {} must exceed the sequence length {} and twice the pairs",
                self.vocab_size, self.seq_len
            ));
        }
        if self.vocab_size > u32::MAX as usize {
            return bad(format!("vocabulary {} does not fit u32", self.vocab_size));
        }
        if !(self.power_a > 0.0 && self.power_a <= 1.0) {
            return bad(format!(
                "power-law exponent {} must be in (0, 1]",
                self.power_a
            ));
        }
        Ok(())
    }

    /// Number of query slots `(T - 2P) / 2`; gaps are drawn from `[0, slots)`.
    pub fn gap_slots(&self) -> usize {
        (self.seq_len - 2 * self.kv_pairs) / 2
    }

    /// Probability of gap `g` for `g` in `[0, slots)`: `(g + 1)^(a - 1)`, normalised.
    pub fn gap_probabilities(&self) -> Vec<f64> {
        let w: Vec<f64> = (0..self.gap_slots())
            .map(|g| ((g + 1) as f64).powf(self.power_a - 1.0))
            .collect();
        let total: f64 = w.iter().sum();
        w.into_iter().map(|x| x / total).collect()
    }

    /// `batch` examples drawn from `seed`; the same seed gives the same batch, bit for bit.
    pub fn generate(&self, batch: usize, seed: u64) -> Result<MqarBatch, MqarError> {
        self.validate()?;
        let mut rng = seeded(seed);
        let t = self.seq_len;
        let mut inputs = vec![0u32; batch * t];
        let mut targets = vec![IGNORE; batch * t];
        let weights = self.gap_probabilities();
        for (inp, tgt) in inputs.chunks_exact_mut(t).zip(targets.chunks_exact_mut(t)) {
            self.fill_example(&mut rng, &weights, inp, tgt);
        }
        Ok(MqarBatch {
            inputs,
            targets,
            batch,
            seq_len: t,
        })
    }

    fn fill_example(&self, rng: &mut Rng, weights: &[f64], inp: &mut [u32], tgt: &mut [u32]) {
        let half = self.vocab_size / 2;
        let p = self.kv_pairs;
        let keys = sample_distinct(rng, 1, half, p);
        let values = sample_distinct(rng, half, self.vocab_size, p);
        for i in 0..p {
            inp[2 * i] = keys[i] as u32;
            inp[2 * i + 1] = values[i] as u32;
        }
        let gaps = weighted_without_replacement(rng, weights, p);
        let mut is_query = vec![false; inp.len()];
        for (i, &g) in gaps.iter().enumerate() {
            let pos = 2 * p + 2 * g;
            inp[pos] = keys[i] as u32;
            tgt[pos] = values[i] as u32;
            is_query[pos] = true;
        }
        // Filler: uniform over the whole vocabulary, as Zoology's `random_non_queries`.
        for (pos, x) in inp.iter_mut().enumerate().skip(2 * p) {
            if !is_query[pos] {
                *x = rng.random_range(0..self.vocab_size as u32);
            }
        }
    }
}

/// `n` distinct integers from `[lo, hi)` in draw order (partial Fisher-Yates over a sparse map,
/// so the cost is `O(n)` however large the range).
fn sample_distinct(rng: &mut Rng, lo: usize, hi: usize, n: usize) -> Vec<usize> {
    let len = hi - lo;
    let mut swapped = std::collections::HashMap::<usize, usize>::with_capacity(2 * n);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let j = rng.random_range(i..len);
        let at_j = *swapped.get(&j).unwrap_or(&j);
        let at_i = *swapped.get(&i).unwrap_or(&i);
        swapped.insert(j, at_i);
        out.push(lo + at_j);
    }
    out
}

/// `n` distinct indices drawn one after another with probability proportional to `weights`
/// among those not drawn yet (numpy's `choice(replace=False, p=...)`).
fn weighted_without_replacement(rng: &mut Rng, weights: &[f64], n: usize) -> Vec<usize> {
    let mut w = weights.to_vec();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let total: f64 = w.iter().sum();
        let mut u = rng.random::<f64>() * total;
        let mut pick = None;
        for (i, &wi) in w.iter().enumerate() {
            if wi <= 0.0 {
                continue;
            }
            pick = Some(i);
            if u < wi {
                break;
            }
            u -= wi;
        }
        // Rounding can leave `u` past the last bin; the last positive weight is then right.
        if let Some(i) = pick {
            w[i] = 0.0;
            out.push(i);
        }
    }
    out
}
