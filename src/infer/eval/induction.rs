//! The induction-head probe: how much better a model predicts a random token sequence the
//! second time it sees it in the window (Olsson et al. 2022, "In-context Learning and
//! Induction Heads", the repeated-random-tokens measurement).
//!
//! Each of `N` sequences is `x₁ … x_L x₁ … x_L`: `L` ids drawn uniformly from the vocabulary
//! (end-of-text ids excluded, so no sequence holds a document break), then the same `L` again.
//! The model reads the `2L − 1` inputs in one window (so `2L ≤ context`) and is scored on
//! `x₂ … x_L` of each copy: `L − 1` targets apiece. The first token of either copy is left
//! out: nothing before it says what it is, in the second copy least of all (it follows `x_L`,
//! which appeared once). On the first copy no model can beat `ln V'` (`V'` ids drawn from)
//! by more than what it learned of the token frequencies; a model whose heads copy what
//! followed the previous occurrence of the current token predicts the second copy far below
//! it. The **induction score** is `first − second`, per sequence, with a 95% t interval over
//! the sequences.
//!
//! It lives beside the evaluation, not in `analysis`, because it is one: windows scored by
//! [`CausalLm::score_windows`] with their logits, for any causal model (GPT or Llama).

use rand::Rng as _;
use serde::Serialize;

use super::LogitsSink;
use super::positions::row_nll;
use super::windows::Window;
use crate::infer::causal_lm::CausalLm;
use crate::init::rng::seeded;
use crate::io::table::{Align, Block, Table};
use crate::model::ModelError;
use crate::stats::paired::{PairedInterval, paired_interval};

/// Sequences scored when none is said.
pub const DEFAULT_SEQUENCES: usize = 64;
/// The most sequences one probe draws (their tokens are held at once).
pub const MAX_SEQUENCES: usize = 1 << 16;

/// What the probe draws and how it batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct InductionOptions {
    /// `L`, tokens per copy, `2 ≤ L` and `2L ≤ context` (`None`: half the context).
    pub len: Option<usize>,
    /// `N`, sequences, `2 ≤ N ≤` [`MAX_SEQUENCES`] (two at least, for an interval).
    pub sequences: usize,
    /// Seed of the draws: the same seed, vocabulary and `L` give the same sequences.
    pub seed: u64,
    /// Sequences per forward pass (memory: `batch · (2L − 1) · V` logits).
    pub batch: usize,
}

impl Default for InductionOptions {
    /// Half the context, [`DEFAULT_SEQUENCES`] sequences, seed 0, one sequence per forward.
    fn default() -> Self {
        Self {
            len: None,
            sequences: DEFAULT_SEQUENCES,
            seed: 0,
            batch: 1,
        }
    }
}

fn refuse<T>(msg: String) -> crate::Result<T> {
    Err(ModelError::Eval(msg).into())
}

impl InductionOptions {
    /// `L` for a model of `context` positions, checked.
    pub fn resolve(&self, context: usize) -> crate::Result<usize> {
        let len = self.len.unwrap_or(context / 2);
        if len < 2 || len > context / 2 {
            return refuse(format!(
                "an induction length of {len}: need 2 to {} (two copies must fit the model's \
                 context of {context})",
                context / 2
            ));
        }
        if !(2..=MAX_SEQUENCES).contains(&self.sequences) {
            return refuse(format!(
                "{} induction sequences: need 2 to {MAX_SEQUENCES}",
                self.sequences
            ));
        }
        if self.batch == 0 {
            return refuse("a batch of 0 sequences: use at least 1".into());
        }
        Ok(len)
    }
}

/// What the probe measured. Losses are mean nats per target over a copy's `L − 1` targets;
/// each interval is the one-sample 95% t interval over the sequences.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InductionReport {
    /// `L`, tokens per copy.
    pub len: usize,
    /// `N`, sequences scored.
    pub sequences: usize,
    /// Seed of the draws.
    pub seed: u64,
    /// `V'`: the ids drawn from (the vocabulary less `excluded`).
    pub vocab: usize,
    /// End-of-text ids never drawn.
    pub excluded: Vec<u32>,
    /// `ln V'`: the loss of a uniform guess.
    pub uniform_loss: f64,
    /// Loss on `x₂ … x_L` of the first copy.
    pub first: PairedInterval,
    /// Loss on `x₂ … x_L` of the second copy.
    pub second: PairedInterval,
    /// `first − second` per sequence: the induction score.
    pub score: PairedInterval,
}

/// `sequences` sequences of `len` ids drawn uniformly from `0..vocab_size` less `exclude`,
/// each followed by itself: `sequences · 2·len` ids. Returns them and the ids excluded
/// (sorted, those inside the vocabulary).
pub fn repeated_sequences(
    len: usize,
    sequences: usize,
    vocab_size: usize,
    exclude: &[u32],
    seed: u64,
) -> crate::Result<(Vec<u32>, Vec<u32>)> {
    let mut excluded: Vec<u32> = exclude
        .iter()
        .copied()
        .filter(|&e| (e as usize) < vocab_size)
        .collect();
    excluded.sort_unstable();
    excluded.dedup();
    let drawn = vocab_size - excluded.len();
    if drawn < 2 || u32::try_from(vocab_size).is_err() {
        return refuse(format!(
            "a vocabulary of {vocab_size} ids less {} excluded: need 2 to 2^32 ids to draw from",
            excluded.len()
        ));
    }
    let total = len
        .checked_mul(2)
        .and_then(|n| n.checked_mul(sequences))
        .filter(|&n| n <= isize::MAX as usize / 4);
    let Some(total) = total else {
        return refuse(format!(
            "{sequences} sequences of 2 x {len} tokens are too many to hold"
        ));
    };
    let mut rng = seeded(seed);
    let mut out = Vec::with_capacity(total);
    for _ in 0..sequences {
        let start = out.len();
        for _ in 0..len {
            // Draw among the kept ids, then step over each excluded id at or below the draw.
            let mut id = rng.random_range(0..drawn as u32);
            for &e in &excluded {
                if id >= e {
                    id += 1;
                }
            }
            out.push(id);
        }
        out.extend_from_within(start..start + len);
    }
    Ok((out, excluded))
}

/// Runs the probe on `model`, never drawing the ids in `exclude`.
pub fn probe<M: CausalLm>(
    model: &mut M,
    options: &InductionOptions,
    exclude: &[u32],
) -> crate::Result<InductionReport> {
    let len = options.resolve(model.context())?;
    let v = model.vocab_size();
    let n = options.sequences;
    let (tokens, excluded) = repeated_sequences(len, n, v, exclude, options.seed)?;
    // Inputs x₁ … x_L x₁ … x_{L−1}: the last row predicts the second copy's x_L.
    let windows: Vec<Window> = (0..n)
        .map(|s| Window {
            begin: s * 2 * len,
            end: s * 2 * len + 2 * len - 1,
            from: 0,
        })
        .collect();
    let mut cache = model.new_cache(2 * len - 1)?;
    let (mut first, mut second) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut next = 0usize;
    let mut agreed = true;
    let mut sink = |rows: &[f32], targets: std::ops::Range<usize>| {
        let w = windows.get(next);
        next += 1;
        let fits = w.is_some_and(|w| w.targets() == targets && rows.len() == w.scored() * v);
        agreed &= fits;
        if !fits {
            return;
        }
        let nll = row_nll(rows, &tokens[targets], v);
        // Row r predicts x_{r+2} of the first copy for r < L − 1; row L − 1 the second
        // copy's x₁ (not scored); row L − 1 + r its x_{r+1}.
        let copy = |rows: &[f64]| rows.iter().sum::<f64>() / (len - 1) as f64;
        first.push(copy(&nll[..len - 1]));
        second.push(copy(&nll[len..]));
    };
    for batch in windows.chunks(options.batch) {
        model.score_windows(
            &tokens,
            batch,
            &mut cache,
            Some(&mut sink as &mut LogitsSink<'_>),
        )?;
    }
    if !agreed || first.len() != n {
        return refuse("the model scored rows other than the probe's windows".into());
    }
    let score: Vec<f64> = first.iter().zip(&second).map(|(a, b)| a - b).collect();
    let report = InductionReport {
        len,
        sequences: n,
        seed: options.seed,
        vocab: v - excluded.len(),
        uniform_loss: ((v - excluded.len()) as f64).ln(),
        first: paired_interval(&first),
        second: paired_interval(&second),
        score: paired_interval(&score),
        excluded,
    };
    if !(report.first.mean.is_finite() && report.second.mean.is_finite()) {
        return refuse(format!(
            "the induction losses are {} and {} (the model's weights hold NaN or infinity, or \
             its logits overflow): no probe to report",
            report.first.mean, report.second.mean
        ));
    }
    Ok(report)
}

impl InductionReport {
    /// The text form: one table, each loss with its interval.
    pub fn blocks(&self) -> Vec<Block> {
        let mut t = Table::new(&[
            ("", Align::Left),
            ("mean", Align::Right),
            ("95% interval", Align::Left),
        ])
        .with_title(format!(
            "induction probe: {} random sequences of {} tokens, each repeated (seed {})",
            self.sequences, self.len, self.seed
        ));
        let ci = |i: &PairedInterval| match (i.lo, i.hi) {
            (Some(lo), Some(hi)) => format!("[{lo:.4}, {hi:.4}]"),
            _ => "-".to_string(),
        };
        for (name, i) in [
            ("first copy", &self.first),
            ("second copy", &self.second),
            ("induction score", &self.score),
        ] {
            t.row([name.to_string(), format!("{:.4}", i.mean), ci(i)]);
        }
        t.row([
            "uniform guess".to_string(),
            format!("{:.4}", self.uniform_loss),
            format!("ln {} ids", self.vocab),
        ]);
        t.note("losses in nats/token on tokens 2..L of each copy; score = first − second");
        vec![Block::Table(t)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gpt, GptConfig};

    #[test]
    fn draws_repeat_skip_excluded_ids_and_follow_the_seed() {
        let (a, ex) = repeated_sequences(5, 40, 7, &[3, 9, 3], 11).unwrap();
        assert_eq!(ex, [3]);
        assert_eq!(a.len(), 40 * 10);
        for s in a.chunks(10) {
            assert_eq!(s[..5], s[5..]);
        }
        assert!(a.iter().all(|&x| x != 3 && x < 7));
        // Every kept id appears (200 draws of 6 ids).
        for id in [0, 1, 2, 4, 5, 6] {
            assert!(a.contains(&id), "{id} never drawn");
        }
        assert_eq!(repeated_sequences(5, 40, 7, &[3], 11).unwrap().0, a);
        assert_ne!(repeated_sequences(5, 40, 7, &[3], 12).unwrap().0, a);
        assert!(repeated_sequences(5, 4, 3, &[0, 1], 0).is_err());
        assert!(repeated_sequences(usize::MAX / 2, 4, 30, &[], 0).is_err());
    }

    #[test]
    fn options_refuse_what_does_not_fit() {
        let o = InductionOptions::default();
        assert_eq!(o.resolve(64).unwrap(), 32);
        assert_eq!(o.resolve(9).unwrap(), 4);
        let with = |len, sequences, batch| InductionOptions {
            len,
            sequences,
            batch,
            seed: 0,
        };
        assert_eq!(with(Some(32), 2, 1).resolve(64).unwrap(), 32);
        for bad in [
            with(Some(33), 64, 1),
            with(Some(1), 64, 1),
            with(None, 1, 1),
            with(None, MAX_SEQUENCES + 1, 1),
            with(None, 64, 0),
        ] {
            assert!(bad.resolve(64).is_err(), "{bad:?}");
        }
        assert!(o.resolve(3).is_err());
    }

    #[test]
    fn the_probe_is_finite_and_reproducible() {
        let mut m = Gpt::new(GptConfig::preset("tiny").unwrap(), 2).unwrap();
        let o = InductionOptions {
            sequences: 5,
            batch: 2,
            ..InductionOptions::default()
        };
        let a = probe(&mut m, &o, &[10]).unwrap();
        assert_eq!((a.len, a.sequences, a.vocab), (4, 5, 10));
        assert_eq!(a.excluded, [10]);
        for i in [&a.first, &a.second, &a.score] {
            assert!(i.mean.is_finite() && i.lo.unwrap() <= i.mean && i.mean <= i.hi.unwrap());
        }
        assert!((a.score.mean - (a.first.mean - a.second.mean)).abs() < 1e-12);
        // Batching does not change the numbers (to the f32 rounding of a wider forward).
        let b = probe(&mut m, &InductionOptions { batch: 5, ..o }, &[10]).unwrap();
        assert!((a.first.mean - b.first.mean).abs() < 1e-5 * a.first.mean);
        assert!((a.second.mean - b.second.mean).abs() < 1e-5 * a.second.mean);
        let c = probe(&mut m, &InductionOptions { seed: 1, ..o }, &[10]).unwrap();
        assert_ne!(a.first.mean, c.first.mean);
        let bad = InductionOptions { len: Some(5), ..o };
        assert!(probe(&mut m, &bad, &[]).is_err());
    }
}
