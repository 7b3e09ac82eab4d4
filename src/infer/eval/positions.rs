//! Loss by position in the window: the evaluation of [`super::evaluate`], with each scored
//! target's negative log-likelihood also summed by the row of the window that predicts it.
//!
//! Position `p` (1-based) is the `p`-th input row of a window: it predicts the next token
//! having seen `p` tokens of the window. With non-overlapping windows of the model's context
//! (`eval --checkpoint`'s default) every position is scored once per window, so the curve
//! says how much a model gains from context it was trained on. The mean at position `p` is
//! `Σ nll / count` over the windows that scored row `p`; weighting the means by their counts
//! gives back the overall loss, which the test checks.
//!
//! The per-row losses come from the scored logits ([`super::evaluate_logits`]) and an f64
//! log-softmax per row, so the report's overall loss is the one of that path: for the GPT it
//! can differ from plain `eval` (a fused f32 cross-entropy) in the sixth significant digit.

use rayon::prelude::*;
use serde::Serialize;

use super::score::log_prob;
use super::windows::{self, Window};
use super::{EvalOptions, EvalReport, evaluate_logits};
use crate::infer::causal_lm::CausalLm;
use crate::io::table::{Align, Block, Table};
use crate::model::ModelError;

/// Positions shown per line in the text form of the per-position means.
const PER_LINE: usize = 8;

/// The mean loss at each position of the window, with a summary over position buckets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PositionLoss {
    /// Input tokens per window: positions run 1 to `window`.
    pub window: usize,
    /// Mean negative log-likelihood at position `p` (index `p − 1`), nats; `None` where no
    /// window scored that row (a text shorter than the window).
    pub loss: Vec<Option<f64>>,
    /// Targets scored at each position.
    pub tokens: Vec<usize>,
    /// Means over positions `1`, `2–3`, `4–7`, ... (powers of two, the last cut at the window).
    pub buckets: Vec<PositionBucket>,
}

/// The mean loss over a range of positions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PositionBucket {
    /// First position (1-based).
    pub first: usize,
    /// Last position, inclusive.
    pub last: usize,
    /// Targets scored at these positions.
    pub tokens: usize,
    /// Their mean negative log-likelihood, nats (`None` when none was scored).
    pub loss: Option<f64>,
}

/// Per-position sums of negative log-likelihood, f64.
#[derive(Debug, Clone)]
pub(crate) struct PositionSums {
    sum: Vec<f64>,
    count: Vec<usize>,
}

impl PositionSums {
    /// Empty sums for windows of `window` rows.
    pub(crate) fn new(window: usize) -> Self {
        Self {
            sum: vec![0.0; window],
            count: vec![0; window],
        }
    }

    /// Adds the losses of consecutive rows starting at row `first` (0-based); rows past the
    /// window are refused (the caller's windows disagree with the plan).
    pub(crate) fn add(&mut self, first: usize, nll: &[f64]) -> Option<()> {
        let sums = self.sum.get_mut(first..first.checked_add(nll.len())?)?;
        for (s, x) in sums.iter_mut().zip(nll) {
            *s += x;
        }
        for c in &mut self.count[first..first + nll.len()] {
            *c += 1;
        }
        Some(())
    }

    /// The means and the power-of-two buckets.
    pub(crate) fn finish(&self) -> PositionLoss {
        let mean = |s: f64, n: usize| (n > 0).then(|| s / n as f64);
        let window = self.sum.len();
        let mut buckets = Vec::new();
        let mut first = 1usize;
        while first <= window {
            let last = first.saturating_mul(2).saturating_sub(1).min(window);
            let rows = first - 1..last;
            let s: f64 = self.sum[rows.clone()].iter().sum();
            let n: usize = self.count[rows].iter().sum();
            buckets.push(PositionBucket {
                first,
                last,
                tokens: n,
                loss: mean(s, n),
            });
            first = last + 1;
        }
        PositionLoss {
            window,
            loss: self
                .sum
                .iter()
                .zip(&self.count)
                .map(|(&s, &n)| mean(s, n))
                .collect(),
            tokens: self.count.clone(),
            buckets,
        }
    }
}

/// `−log p(target)` of each row of `rows` (`targets.len() x V`), the rows in parallel.
pub(crate) fn row_nll(rows: &[f32], targets: &[u32], v: usize) -> Vec<f64> {
    targets
        .par_iter()
        .enumerate()
        .map(|(r, &t)| -log_prob(&rows[r * v..(r + 1) * v], t as usize))
        .collect()
}

/// [`super::evaluate`] with the loss at each position of the window. `progress(scored)` as
/// there.
pub fn evaluate_by_position<M: CausalLm>(
    model: &mut M,
    tokens: &[u32],
    options: &EvalOptions,
    progress: &mut dyn FnMut(usize),
) -> crate::Result<(EvalReport, PositionLoss)> {
    let (window, stride) = options.resolve(model.context())?;
    // The windows the evaluation will run, in its order: each call of the sink is the next
    // one, which gives the row of the window its first scored target sits in.
    let plan: Vec<Window> = if tokens.len() >= 2 {
        windows::plan(tokens.len(), window, stride)
    } else {
        Vec::new()
    };
    let v = model.vocab_size();
    let mut sums = PositionSums::new(window);
    let (mut next, mut agreed) = (0usize, true);
    let report = evaluate_logits(model, tokens, options, progress, &mut |rows, targets| {
        let w = plan.get(next);
        next += 1;
        let fits = w.is_some_and(|w| w.targets() == targets && rows.len() == w.scored() * v);
        let added = w.filter(|_| fits).and_then(|w| {
            let nll = row_nll(rows, &tokens[targets.clone()], v);
            sums.add(w.from, &nll)
        });
        agreed &= added.is_some();
    })?;
    if !agreed {
        return Err(ModelError::Eval(
            "the model scored windows other than the evaluation planned: no loss by position"
                .into(),
        )
        .into());
    }
    Ok((report, sums.finish()))
}

impl PositionLoss {
    /// The text form: the buckets as a table, then every position's mean, `PER_LINE` a line.
    pub fn blocks(&self) -> Vec<Block> {
        let cell = |x: Option<f64>| x.map_or("-".to_string(), |l| format!("{l:.4}"));
        let mut t = Table::new(&[
            ("positions", Align::Right),
            ("tokens", Align::Right),
            ("loss", Align::Right),
        ])
        .with_title("loss by position in the window (nats/token)");
        for b in &self.buckets {
            let span = if b.first == b.last {
                b.first.to_string()
            } else {
                format!("{}-{}", b.first, b.last)
            };
            t.row([span, b.tokens.to_string(), cell(b.loss)]);
        }
        let mut lines = Table::new(&[("positions", Align::Right), ("loss", Align::Left)]);
        for (i, chunk) in self.loss.chunks(PER_LINE).enumerate() {
            let first = i * PER_LINE + 1;
            let last = first + chunk.len() - 1;
            let values: Vec<String> = chunk.iter().map(|&x| cell(x)).collect();
            lines.row([format!("{first}-{last}"), values.join(" ")]);
        }
        vec![Block::Table(t), Block::Table(lines)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::evaluate;
    use crate::model::{AttentionKind, Gpt, GptConfig};

    fn tiny() -> Gpt {
        let mut cfg = GptConfig::preset("tiny").unwrap();
        cfg.attention = AttentionKind::Orthogonal;
        Gpt::new(cfg, 5).unwrap()
    }

    /// `Σ mean_p · count_p / Σ count_p` is the overall loss, and every scored target sits at
    /// exactly one position.
    fn consistent(report: &EvalReport, by: &PositionLoss) {
        let total: usize = by.tokens.iter().sum();
        assert_eq!(total, report.tokens);
        let weighted: f64 = by
            .loss
            .iter()
            .zip(&by.tokens)
            .map(|(l, &n)| l.unwrap_or(0.0) * n as f64)
            .sum::<f64>()
            / total as f64;
        assert!(
            (weighted - report.loss).abs() <= 1e-12 * report.loss,
            "{weighted} vs {}",
            report.loss
        );
        let in_buckets: usize = by.buckets.iter().map(|b| b.tokens).sum();
        assert_eq!(in_buckets, total);
    }

    #[test]
    fn means_average_back_to_the_loss() {
        let mut m = tiny();
        let ctx = m.config().context;
        let v = m.config().vocab_size as u32;
        // Three whole windows and a tail of 5.
        let tokens: Vec<u32> = (0..3 * ctx + 6).map(|i| (i * 7 % 13) as u32 % v).collect();
        let options = EvalOptions {
            batch: 2,
            ..EvalOptions::default()
        };
        let (report, by) = evaluate_by_position(&mut m, &tokens, &options, &mut |_| {}).unwrap();
        consistent(&report, &by);
        assert_eq!(by.window, ctx);
        // The tail window scores positions 1-5 a fourth time.
        assert_eq!(by.tokens[0], 4);
        assert_eq!(by.tokens[4], 4);
        assert_eq!(by.tokens[5], 3);
        assert_eq!(by.tokens[ctx - 1], 3);
        // The same loss as the fused evaluation, to f32 rounding.
        let plain = evaluate(&mut m, &tokens, &options, &mut |_| {}).unwrap();
        assert!((plain.loss - report.loss).abs() < 1e-5 * plain.loss);
        assert_eq!(plain.tokens, report.tokens);
        // Buckets 1, 2-3, 4-7, ... cut at the window.
        let b = &by.buckets;
        assert_eq!((b[0].first, b[0].last), (1, 1));
        assert_eq!((b[1].first, b[1].last), (2, 3));
        assert_eq!(b.last().unwrap().last, ctx);
        assert_eq!(b[0].loss, by.loss[0]);
    }

    #[test]
    fn sliding_windows_count_only_new_targets() {
        let mut m = tiny();
        let v = m.config().vocab_size as u32;
        let tokens: Vec<u32> = (0..50).map(|i| (i * 5 % 11) as u32 % v).collect();
        let options = EvalOptions {
            window: Some(8),
            stride: Some(3),
            batch: 4,
            max_batches: None,
        };
        let (report, by) = evaluate_by_position(&mut m, &tokens, &options, &mut |_| {}).unwrap();
        consistent(&report, &by);
        // The first window scores rows 1-8; the others only their last 3 rows.
        assert_eq!(by.tokens[0], 1);
        assert_eq!(by.tokens[4], 1);
        assert!(by.tokens[7] > 10);
    }

    #[test]
    fn a_short_text_leaves_positions_empty_and_bad_options_fail() {
        let mut m = tiny();
        let tokens = [1u32, 2, 3, 4];
        let (_, by) =
            evaluate_by_position(&mut m, &tokens, &EvalOptions::default(), &mut |_| {}).unwrap();
        assert!(by.loss[2].is_some() && by.loss[3].is_none());
        assert_eq!(by.buckets[1].tokens, 2);
        for b in by.blocks() {
            assert!(matches!(b, Block::Table(t) if t.check().is_ok()));
        }
        assert!(evaluate_by_position(&mut m, &[1], &EvalOptions::default(), &mut |_| {}).is_err());
        let bad = EvalOptions {
            batch: 0,
            ..EvalOptions::default()
        };
        assert!(evaluate_by_position(&mut m, &tokens, &bad, &mut |_| {}).is_err());
    }

    #[test]
    fn sums_refuse_rows_past_the_window() {
        let mut s = PositionSums::new(4);
        assert!(s.add(2, &[1.0, 2.0]).is_some());
        assert!(s.add(3, &[1.0, 2.0]).is_none());
        assert!(s.add(usize::MAX, &[1.0]).is_none());
        let f = s.finish();
        assert_eq!(f.loss, [None, None, Some(1.0), Some(2.0)]);
        // Buckets 1, 2-3, 4: row 1 was never scored, so 2-3 is row 2 alone.
        assert_eq!(f.buckets.len(), 3);
        assert_eq!((f.buckets[1].tokens, f.buckets[1].loss), (1, Some(1.0)));
        assert_eq!((f.buckets[2].tokens, f.buckets[2].loss), (1, Some(2.0)));
    }
}
