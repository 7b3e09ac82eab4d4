//! Tuned comparisons (`compare --lr-sweep`): every variant trains at every peak learning rate
//! on the same paired seeds, and is reported at its own best rate.
//!
//! The best rate must not be chosen on the split the comparison reports, or the reported
//! loss is biased toward whichever variant got lucky on it. So a sweep holds out the last
//! [`HELD_OUT_FRACTION`] of the *training* split: no run trains on it, every finished run is
//! scored on it (the whole held-out part, like the final validation loss), and each variant's
//! rate is the one with the lowest mean held-out loss over seeds. The validation split is only
//! ever reported.

use std::collections::BTreeMap;

use super::plan::{ComparePlan, RunId, run_key_of};
use super::summary::FinalEval;
use crate::Result;
use crate::model::AttentionKind;
use crate::train::invalid;
use crate::train::session::Prepared;

/// The fraction of the training split a sweep holds out to choose learning rates on.
pub const HELD_OUT_FRACTION: f64 = 0.1;

/// The data of a sweep's runs: `prepared` with the training split cut before its held-out
/// tail, and that tail.
pub fn hold_out(prepared: &Prepared, context: usize) -> Result<(Prepared, Vec<u32>)> {
    let train = &prepared.split.train;
    // The library's one cut rule; the message names the flag that asked for it.
    let (split, held) = prepared
        .split
        .without_tail(HELD_OUT_FRACTION, context)
        .map_err(|_| {
            invalid(format!(
                "--lr-sweep holds out the last {:.0}% of the training split ({} tokens) to \
                 choose the learning rates on, and both parts need at least {} tokens: use a \
                 longer text or a shorter --context",
                HELD_OUT_FRACTION * 100.0,
                train.len(),
                context.saturating_add(1)
            ))
        })?;
    let mut part = prepared.clone();
    part.split = split;
    Ok((part, held))
}

/// One variant at one learning rate, over the seeds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LrCell {
    /// Attention name.
    pub attention: String,
    /// Peak learning rate.
    pub lr: f64,
    /// Mean over seeds of the loss on the held-out part of the training split (what the
    /// choice is made on).
    pub held_out_loss_mean: f64,
    /// Per seed, in the plan's seed order.
    pub held_out_loss: Vec<f64>,
    /// Mean over seeds of the final loss on the whole validation split (reported, never used
    /// to choose).
    pub val_loss_mean: f64,
    /// Per seed.
    pub val_loss: Vec<f64>,
    /// Whether this is the variant's chosen rate.
    pub chosen: bool,
}

/// Every variant at every rate, with each variant's chosen rate (lowest mean held-out loss;
/// the lower rate wins a tie) marked. Every run must be in `finals` with its held-out loss.
pub fn table(plan: &ComparePlan, finals: &BTreeMap<String, FinalEval>) -> Result<Vec<LrCell>> {
    let mut cells = Vec::new();
    for &attention in &plan.attentions {
        let first = cells.len();
        for &lr in &plan.lrs {
            let (mut held, mut val) = (Vec::new(), Vec::new());
            for &seed in &plan.seeds {
                let id = RunId {
                    seed,
                    lr: Some(lr),
                    attention,
                };
                let key = run_key_of(id);
                let f = finals
                    .get(&key)
                    .ok_or_else(|| invalid(format!("{key}: not finished")))?;
                let h = f.held_out_loss.ok_or_else(|| {
                    invalid(format!(
                        "{key} has no held-out loss in finals.json; delete finals.json and \
                         resume: the finished runs are evaluated again"
                    ))
                })?;
                held.push(h);
                val.push(f.val_loss);
            }
            cells.push(LrCell {
                attention: attention.name().to_string(),
                lr,
                held_out_loss_mean: crate::stats::mean(&held),
                held_out_loss: held,
                val_loss_mean: crate::stats::mean(&val),
                val_loss: val,
                chosen: false,
            });
        }
        let best = (first..cells.len())
            .min_by(|&a, &b| {
                let (x, y) = (&cells[a], &cells[b]);
                x.held_out_loss_mean
                    .total_cmp(&y.held_out_loss_mean)
                    .then(x.lr.total_cmp(&y.lr))
            })
            .ok_or_else(|| invalid("--lr-sweep lists no learning rate"))?;
        cells[best].chosen = true;
    }
    Ok(cells)
}

/// The chosen rate of `attention` in `cells` (`None` without a sweep).
pub fn chosen_lr(cells: &[LrCell], attention: AttentionKind) -> Option<f64> {
    cells
        .iter()
        .find(|c| c.chosen && c.attention == attention.name())
        .map(|c| c.lr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Corpus, TokenizerKind};
    use crate::model::GptConfig;
    use crate::train::options::TrainOptions;

    fn plan() -> ComparePlan {
        let corpus = Corpus::tiny_shakespeare();
        ComparePlan::new(
            vec![AttentionKind::Softmax, AttentionKind::Orthogonal],
            vec![0, 1],
            GptConfig::preset("tiny").unwrap(),
            TrainOptions::default(),
            TokenizerKind::Char,
            512,
            crate::train::session::data_record(&corpus),
            None,
        )
        .unwrap()
        .with_lrs(vec![1e-3, 3e-3])
        .unwrap()
    }

    fn fin(val: f64, held: f64) -> FinalEval {
        FinalEval {
            val_loss: val,
            val_tokens: 10,
            seconds: 0.0,
            held_out_loss: Some(held),
        }
    }

    /// The choice follows the held-out losses, never the validation losses: here validation
    /// favours the other rate for both variants, and the table still picks by held-out.
    #[test]
    fn the_choice_is_made_on_the_held_out_part_not_on_validation() {
        let p = plan();
        let mut finals = BTreeMap::new();
        for seed in [0, 1] {
            let key = |lr, a| {
                run_key_of(RunId {
                    seed,
                    lr: Some(lr),
                    attention: a,
                })
            };
            // softmax: 3e-3 better held-out, 1e-3 better on validation.
            finals.insert(key(1e-3, AttentionKind::Softmax), fin(1.0, 2.0));
            finals.insert(key(3e-3, AttentionKind::Softmax), fin(1.5, 1.9));
            // orthogonal: the reverse.
            finals.insert(key(1e-3, AttentionKind::Orthogonal), fin(1.6, 1.8));
            finals.insert(key(3e-3, AttentionKind::Orthogonal), fin(1.1, 1.85));
        }
        let t = table(&p, &finals).unwrap();
        assert_eq!(chosen_lr(&t, AttentionKind::Softmax), Some(3e-3));
        assert_eq!(chosen_lr(&t, AttentionKind::Orthogonal), Some(1e-3));
        assert_eq!(t.iter().filter(|c| c.chosen).count(), 2);
        assert_eq!(t[1].held_out_loss, vec![1.9, 1.9]);
        assert_eq!(t[1].val_loss_mean, 1.5);
        // A run without its held-out loss cannot be chosen among: refused.
        let k = run_key_of(RunId {
            seed: 1,
            lr: Some(3e-3),
            attention: AttentionKind::Orthogonal,
        });
        finals.get_mut(&k).unwrap().held_out_loss = None;
        assert!(table(&p, &finals).is_err());
    }

    /// The held-out part is the training split's tail, disjoint from what the runs train on
    /// and from the validation split.
    #[test]
    fn hold_out_cuts_the_training_split() {
        let corpus = Corpus::tiny_shakespeare();
        let prepared =
            crate::train::session::prepare(&corpus, TokenizerKind::Char, 512, 64).unwrap();
        let (part, held) = hold_out(&prepared, 64).unwrap();
        let n = prepared.split.train.len();
        assert_eq!(part.split.train.len() + held.len(), n);
        assert_eq!(
            part.split.train[..],
            prepared.split.train[..part.split.train.len()]
        );
        assert_eq!(held[..], prepared.split.train[part.split.train.len()..]);
        assert_eq!(part.split.val, prepared.split.val);
        assert!((held.len() as f64 / n as f64 - HELD_OUT_FRACTION).abs() < 1e-3);
        assert!(hold_out(&prepared, n).is_err());
    }
}
