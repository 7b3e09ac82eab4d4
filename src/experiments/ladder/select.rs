//! Choosing each rung's and variant's learning rate, and widening its grid.
//!
//! The chosen rate is the one with the lowest mean held-out loss over the seeds (the lower
//! rate wins a tie); the validation split is never used to choose. A choice is *bracketed*
//! when the rate at each edge of the variant's rates is measurably worse than the chosen one:
//! its paired per-seed difference from the chosen rate has a mean above twice its standard
//! error (with one seed: above 0). The chosen rate itself at an edge is never bracketed there.
//!
//! When every run of a rung and variant is finished, the grid widens beyond each edge that
//! does not bracket the choice, while fewer than `extend` rates were added beyond that edge of
//! the plan's grid for it: the next rate is `edge² / neighbour` (the grid's own ratio at that
//! edge), rounded to three significant digits so its folder name stays short (unrounded if
//! rounding would not move it beyond the edge). A tie at an edge within the seeds' spread so
//! widens the grid as a choice at the edge does.
//!
//! When every variant of a rung has a choice, each variant also runs every rate another
//! variant chose there ([`AddedWhy::Matched`], not counted against `extend`), so that the
//! variants are compared at a matched rate as well as each at its own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::plan::{AddedLr, AddedWhy, LadderPlan};
use super::result::RunResult;
use crate::model::AttentionKind;

/// Finished runs by `(rung, variant, seed, lr bits)`.
pub type Results = BTreeMap<(String, String, u64, u64), RunResult>;

/// The key of a run in [`Results`].
pub fn key(rung: &str, variant: AttentionKind, seed: u64, lr: f64) -> (String, String, u64, u64) {
    (
        rung.to_string(),
        variant.name().to_string(),
        seed,
        lr.to_bits(),
    )
}

/// Which edge of its rates a chosen rate sits at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Edge {
    /// The lowest rate.
    Low,
    /// The highest rate.
    High,
}

/// One rate of a rung and variant, over the seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateRow {
    /// The rate.
    pub lr: f64,
    /// Whether the ladder added it beyond the plan's grid.
    pub added: bool,
    /// Mean held-out loss over seeds (what the choice is made on).
    pub heldout_loss_mean: f64,
    /// Per seed, in the plan's order.
    pub heldout_loss: Vec<f64>,
    /// Mean validation loss (reported, never used to choose).
    pub val_loss_mean: f64,
    /// Mean transfer loss.
    pub transfer_loss_mean: f64,
}

/// The choice for one rung and variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The rung.
    pub rung: String,
    /// The variant.
    pub variant: String,
    /// Every rate, increasing.
    pub rates: Vec<RateRow>,
    /// The chosen rate.
    pub chosen_lr: f64,
    /// Whether the chosen rate is at an edge of the rates (`None`: inside).
    pub edge: Option<Edge>,
    /// The edges whose rate is not measurably worse than the chosen one (module doc): the
    /// choice is bracketed when this is empty.
    #[serde(default)]
    pub unbracketed: Vec<Edge>,
}

/// The selection of `rung` × `variant`, when every one of its runs is in `results`.
pub fn select(
    plan: &LadderPlan,
    rung: &str,
    variant: AttentionKind,
    results: &Results,
) -> Option<Selection> {
    let lrs = plan.rates(rung, variant);
    let mut rates = Vec::new();
    for &lr in &lrs {
        let runs: Vec<&RunResult> = plan
            .seeds
            .iter()
            .map(|&s| results.get(&key(rung, variant, s, lr)))
            .collect::<Option<_>>()?;
        let held: Vec<f64> = runs.iter().map(|r| r.heldout_loss).collect();
        let mean = |f: fn(&RunResult) -> f64| {
            crate::stats::mean(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        rates.push(RateRow {
            lr,
            added: !plan.lrs.contains(&lr),
            heldout_loss_mean: crate::stats::mean(&held),
            heldout_loss: held,
            val_loss_mean: mean(|r| r.val_loss),
            transfer_loss_mean: mean(|r| r.transfer_loss),
        });
    }
    let best = (0..rates.len()).min_by(|&a, &b| {
        rates[a]
            .heldout_loss_mean
            .total_cmp(&rates[b].heldout_loss_mean)
            .then(a.cmp(&b))
    })?;
    let edge = if best == 0 {
        Some(Edge::Low)
    } else if best + 1 == rates.len() {
        Some(Edge::High)
    } else {
        None
    };
    let last = rates.len() - 1;
    let unbracketed = [(Edge::Low, 0), (Edge::High, last)]
        .into_iter()
        .filter(|&(_, at)| !measurably_worse(&rates[at], &rates[best]))
        .map(|(e, _)| e)
        .collect();
    Some(Selection {
        rung: rung.to_string(),
        variant: variant.name().to_string(),
        chosen_lr: rates[best].lr,
        rates,
        edge,
        unbracketed,
    })
}

/// Whether `row` is measurably worse than `best`: its paired per-seed held-out difference has
/// a mean above twice its standard error (one seed: above 0). `best` itself is not.
pub fn measurably_worse(row: &RateRow, best: &RateRow) -> bool {
    let d: Vec<f64> = row
        .heldout_loss
        .iter()
        .zip(&best.heldout_loss)
        .map(|(a, b)| a - b)
        .collect();
    let m = crate::stats::mean(&d);
    if d.len() < 2 {
        return m > 0.0;
    }
    let se = crate::stats::sample_sd(&d) / (d.len() as f64).sqrt();
    m > 2.0 * se
}

/// The rates to add for `sel` (of `variant`): beyond each edge that does not bracket its
/// choice, while `extend` still allows widening there.
pub fn due_extensions(plan: &LadderPlan, sel: &Selection, variant: AttentionKind) -> Vec<f64> {
    let lrs: Vec<f64> = sel.rates.iter().map(|r| r.lr).collect();
    let (lo, hi) = (plan.lrs[0], plan.lrs[plan.lrs.len() - 1]);
    let added = |below: bool| {
        plan.added_lrs
            .iter()
            .filter(|a| a.rung == sel.rung && a.variant == variant && a.why == AddedWhy::Edge)
            .filter(|a| if below { a.lr < lo } else { a.lr > hi })
            .count()
    };
    let n = lrs.len();
    sel.unbracketed
        .iter()
        .filter_map(|edge| match edge {
            Edge::Low if added(true) < plan.extend => Some(beyond(lrs[0], lrs[1])),
            Edge::High if added(false) < plan.extend => Some(beyond(lrs[n - 1], lrs[n - 2])),
            _ => None,
        })
        .collect()
}

/// `edge² / neighbour`, rounded to three significant digits when that keeps it beyond.
fn beyond(edge: f64, neighbour: f64) -> f64 {
    let exact = edge * (edge / neighbour);
    let rounded: f64 = format!("{exact:.2e}").parse().unwrap_or(exact);
    let outward = |x: f64| {
        if neighbour < edge { x > edge } else { x < edge }
    };
    if outward(rounded) && rounded.is_finite() && rounded > 0.0 {
        rounded
    } else {
        exact
    }
}

/// Adds every due rate to `plan` (given every finished run): the extensions beyond edges,
/// then the rates other variants chose at a rung; returns the rates added.
pub fn extend(plan: &mut LadderPlan, results: &Results) -> Vec<AddedLr> {
    let mut added = Vec::new();
    for rung in plan.rungs.clone() {
        let mut chosen = Vec::new();
        let mut every_variant_chose = true;
        for &variant in &plan.variants.clone() {
            let Some(sel) = select(plan, &rung.name, variant, results) else {
                every_variant_chose = false;
                continue;
            };
            chosen.push(sel.chosen_lr);
            for lr in due_extensions(plan, &sel, variant) {
                push(plan, &mut added, &rung.name, variant, lr, AddedWhy::Edge);
            }
        }
        if !every_variant_chose {
            continue;
        }
        for &variant in &plan.variants.clone() {
            for &lr in &chosen {
                push(plan, &mut added, &rung.name, variant, lr, AddedWhy::Matched);
            }
        }
    }
    added
}

/// Adds `lr` for `rung` × `variant` unless it is not a usable rate or already one of its rates.
fn push(
    plan: &mut LadderPlan,
    added: &mut Vec<AddedLr>,
    rung: &str,
    variant: AttentionKind,
    lr: f64,
    why: AddedWhy,
) {
    if !(lr.is_finite() && lr > 0.0) || plan.rates(rung, variant).contains(&lr) {
        return;
    }
    let a = AddedLr {
        rung: rung.to_string(),
        variant,
        lr,
        why,
    };
    plan.added_lrs.push(a.clone());
    added.push(a);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::ladder::result::FORMAT;
    use crate::experiments::ladder::shape::Params;

    fn plan() -> LadderPlan {
        LadderPlan::from_json(
            r#"{"format": "orthoformer-ladder", "version": 1, "data": "d", "extend": 1,
                "variants": ["softmax", "orthogonal"], "seeds": [0, 1],
                "rungs": [{"name": "a", "layers": 1, "heads": 2, "width": 8},
                          {"name": "b", "layers": 2, "heads": 2, "width": 8}]}"#,
        )
        .unwrap()
    }

    fn result(rung: &str, v: AttentionKind, seed: u64, lr: f64, held: f64) -> RunResult {
        RunResult {
            format: FORMAT.into(),
            version: 1,
            engine: "test".into(),
            device: "none".into(),
            rung: rung.into(),
            variant: v.name().into(),
            seed,
            lr,
            params: Params {
                total: 1,
                trainable: 1,
                non_embedding: 1,
                trainable_non_embedding: 1,
            },
            steps: 1,
            tokens: 1,
            flops_per_step: 1,
            flops: 1,
            seconds: 0.0,
            heldout_loss: held,
            val_loss: 9.0 - held,
            transfer_loss: 5.0,
            curve: Vec::new(),
            spec_sha256: None,
            diverged: None,
            val_spread_loss: None,
        }
    }

    /// Losses `f(lr)` for every seed of `rung` × `v` at its rates.
    fn fill(p: &LadderPlan, r: &mut Results, rung: &str, v: AttentionKind, f: impl Fn(f64) -> f64) {
        for lr in p.rates(rung, v) {
            for s in [0, 1] {
                r.insert(
                    key(rung, v, s, lr),
                    result(rung, v, s, lr, f(lr) + s as f64 * 0.01),
                );
            }
        }
    }

    /// Orthogonal's best rate is the grid's top, so one rate beyond it is added (the grid's
    /// ratio at that edge, three digits), for that rung and variant only; once `extend` is
    /// spent nothing more is added, and the choice is then reported at its edge.
    #[test]
    fn a_rate_at_the_top_edge_widens_the_grid_once() {
        let mut p = plan();
        let mut r = Results::new();
        fill(&p, &mut r, "a", AttentionKind::Softmax, |lr| {
            (lr.ln() - 3e-3f64.ln()).powi(2)
        });
        fill(&p, &mut r, "a", AttentionKind::Orthogonal, |lr| -lr);
        let sel = select(&p, "a", AttentionKind::Softmax, &r).unwrap();
        assert_eq!((sel.chosen_lr, sel.edge), (3e-3, None));
        assert_eq!(sel.rates[0].heldout_loss.len(), 2);
        // Rung b is unfinished: nothing is chosen there.
        assert!(select(&p, "b", AttentionKind::Softmax, &r).is_none());
        let added = extend(&mut p, &r);
        assert_eq!(added.len(), 1);
        assert_eq!(
            (added[0].rung.as_str(), added[0].variant),
            ("a", AttentionKind::Orthogonal)
        );
        assert_eq!(added[0].lr, 0.0333);
        assert_eq!(p.rates("a", AttentionKind::Orthogonal).len(), 5);
        // Unfinished at the new rate: no further choice, no further extension.
        assert!(extend(&mut p, &r).is_empty());
        fill(&p, &mut r, "a", AttentionKind::Orthogonal, |lr| -lr);
        let sel = select(&p, "a", AttentionKind::Orthogonal, &r).unwrap();
        assert_eq!((sel.chosen_lr, sel.edge), (0.0333, Some(Edge::High)));
        assert!(sel.rates[4].added && !sel.rates[3].added);
        // Extend 1 is spent for orthogonal; softmax runs the rate orthogonal chose.
        let added = extend(&mut p, &r);
        assert_eq!(added.len(), 1);
        assert_eq!(
            (added[0].variant, added[0].lr, added[0].why),
            (AttentionKind::Softmax, 0.0333, AddedWhy::Matched)
        );
        fill(&p, &mut r, "a", AttentionKind::Softmax, |lr| {
            (lr.ln() - 3e-3f64.ln()).powi(2)
        });
        assert!(extend(&mut p, &r).is_empty());
        // A matched rate is not counted against `extend`, and softmax's choice is unchanged.
        let sel = select(&p, "a", AttentionKind::Softmax, &r).unwrap();
        assert_eq!((sel.chosen_lr, sel.unbracketed.len()), (3e-3, 0));
    }

    /// The w96-l3 case: the best rate is one below the top edge and the edge rate is worse on
    /// average but within the seeds' spread, so the grid widens above it; once a rate beyond
    /// is clearly worse in every seed, the choice is bracketed and nothing more is added.
    #[test]
    fn a_tie_at_an_edge_within_the_seeds_spread_widens_the_grid() {
        let mut p = plan();
        p.extend = 2;
        let mut r = Results::new();
        let bowl = |lr: f64| (lr.ln() - 3e-3f64.ln()).powi(2);
        fill(&p, &mut r, "a", AttentionKind::Softmax, bowl);
        // Orthogonal: best at 3e-3; 1e-2 worse by +0.02 on seed 0 and −0.01 on seed 1.
        let noisy = |lr: f64, s: u64| {
            if lr == 1e-2 {
                [1.02, 0.99][s as usize]
            } else {
                1.0 + bowl(lr)
            }
        };
        for lr in p.rates("a", AttentionKind::Orthogonal) {
            for s in [0, 1] {
                r.insert(
                    key("a", AttentionKind::Orthogonal, s, lr),
                    result("a", AttentionKind::Orthogonal, s, lr, noisy(lr, s)),
                );
            }
        }
        let sel = select(&p, "a", AttentionKind::Orthogonal, &r).unwrap();
        assert_eq!((sel.chosen_lr, sel.edge), (3e-3, None));
        assert_eq!(sel.unbracketed, vec![Edge::High]);
        let added = extend(&mut p, &r);
        assert_eq!(added.len(), 1, "{added:?}");
        assert_eq!(
            (added[0].variant, added[0].lr, added[0].why),
            (AttentionKind::Orthogonal, 0.0333, AddedWhy::Edge)
        );
        for s in [0, 1] {
            let lr = 0.0333;
            r.insert(
                key("a", AttentionKind::Orthogonal, s, lr),
                result("a", AttentionKind::Orthogonal, s, lr, 2.0 + s as f64 * 0.01),
            );
        }
        let sel = select(&p, "a", AttentionKind::Orthogonal, &r).unwrap();
        assert!(sel.unbracketed.is_empty());
        assert!(extend(&mut p, &r).is_empty());
        assert!(!measurably_worse(&sel.rates[3], &sel.rates[2]));
        assert!(measurably_worse(&sel.rates[4], &sel.rates[2]));
    }

    #[test]
    fn the_low_edge_extends_downward_and_ties_go_to_the_lower_rate() {
        let mut p = plan();
        let mut r = Results::new();
        fill(&p, &mut r, "a", AttentionKind::Softmax, |lr| lr);
        fill(&p, &mut r, "a", AttentionKind::Orthogonal, |_| 1.0);
        let added = extend(&mut p, &r);
        // Softmax widens below; a flat orthogonal is bracketed at neither edge.
        assert_eq!(added.len(), 3, "{added:?}");
        assert!((added[0].lr - 9e-5).abs() < 1e-12, "{}", added[0].lr);
        assert_eq!(added[1].lr, added[0].lr);
        assert_eq!(added[2].lr, 0.0333);
        assert_eq!(beyond(1e-3, 1.0001e-3), 1e-3 * (1e-3 / 1.0001e-3));
    }
}
