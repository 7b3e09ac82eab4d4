//! The equal-step, equal-FLOPs and equal-time readings: for every variant against softmax at
//! every rung, each at its own chosen rate, the difference in held-out loss (variant minus
//! softmax; negative: the variant is better), paired per seed, with a Student t interval.
//!
//! All three read the runs' held-out curves (the same windows at every point, so the three
//! are comparable): at the end (both runs take the rung's steps); at the FLOPs the cheaper
//! run spent in all; at the training seconds the faster run took in all. The other run's
//! curve is interpolated linearly between its evaluations there
//! (`analysis::scaling::interpolate`).
//!
//! The rates were chosen on that held-out split, so two more readings at the end score the
//! runs on text no choice saw: the validation split and the out-of-domain transfer text.
//! Two matched-rate readings of the validation loss put both variants at one rate (softmax's
//! chosen rate, then the variant's), so a gap is not a difference of tuning alone.

use serde::{Deserialize, Serialize};

use super::result::RunResult;
use super::select::{Results, Selection, key};
use crate::analysis::scaling::{Interval, interpolate, paired_interval};
use crate::model::AttentionKind;

/// The two-sided level of the readings' intervals.
pub const LEVEL: f64 = 0.95;

/// One reading over the seeds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// Mean over seeds of variant − softmax held-out loss.
    pub mean: f64,
    /// Its t interval at [`LEVEL`] (`None` with fewer than 2 seeds).
    pub interval: Option<Interval>,
    /// Per seed, in the plan's order (seeds whose curves could not be read are left out).
    pub per_seed: Vec<f64>,
    /// Where each seed was read: the step, FLOPs or seconds.
    pub at: Vec<f64>,
}

/// The readings of one variant against softmax at one rung.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RungReadings {
    /// The rung.
    pub rung: String,
    /// The variant.
    pub variant: String,
    /// The variant's chosen rate.
    pub lr: f64,
    /// Softmax's chosen rate.
    pub softmax_lr: f64,
    /// At the end (equal steps and tokens).
    pub equal_steps: Reading,
    /// At the FLOPs the cheaper run spent.
    pub equal_flops: Reading,
    /// At the training seconds the faster run took.
    pub equal_time: Reading,
    /// At the end, on the validation split (no rate was chosen on it).
    #[serde(default)]
    pub validation: Reading,
    /// At the end, on the out-of-domain transfer text.
    #[serde(default)]
    pub transfer: Reading,
    /// At the end, on windows spread over the whole validation split ([`super::spread`]);
    /// `None` until every run of the pairs is scored so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_spread: Option<Reading>,
    /// Validation loss with both at softmax's chosen rate (`None` until the variant ran it).
    #[serde(default)]
    pub matched_softmax_lr: Option<Reading>,
    /// Validation loss with both at the variant's chosen rate (`None` until softmax ran it).
    #[serde(default)]
    pub matched_variant_lr: Option<Reading>,
}

/// The reading of per-seed differences `per_seed`, read at `at`: their mean and paired
/// interval.
fn of_differences(per_seed: Vec<f64>, at: Vec<f64>) -> Reading {
    let (mean, interval) = paired_interval(&per_seed, LEVEL);
    Reading {
        mean,
        interval,
        per_seed,
        at,
    }
}

/// `(x, held-out loss)` of a run's curve, `x` by `f`.
fn points(r: &RunResult, f: fn(&super::result::CurvePoint) -> f64) -> Vec<(f64, f64)> {
    r.curve.iter().map(|p| (f(p), p.heldout_loss)).collect()
}

/// One reading from per-seed `(variant, softmax)` runs, each read at the smaller of the two
/// runs' last `x`.
fn reading(
    pairs: &[(&RunResult, &RunResult)],
    f: fn(&super::result::CurvePoint) -> f64,
) -> Reading {
    let (mut per_seed, mut at) = (Vec::new(), Vec::new());
    for (v, s) in pairs {
        let (cv, cs) = (points(v, f), points(s, f));
        let (Some(ev), Some(es)) = (cv.last(), cs.last()) else {
            continue;
        };
        let x = ev.0.min(es.0);
        if let (Some(lv), Some(ls)) = (interpolate(&cv, x), interpolate(&cs, x)) {
            per_seed.push(lv - ls);
            at.push(x);
        }
    }
    of_differences(per_seed, at)
}

/// A reading of a final loss `f` of per-seed `(variant, softmax)` runs, read at the end.
fn final_reading(pairs: &[(&RunResult, &RunResult)], f: fn(&RunResult) -> f64) -> Reading {
    let per_seed: Vec<f64> = pairs.iter().map(|(v, s)| f(v) - f(s)).collect();
    let at = pairs
        .iter()
        .map(|(v, _)| v.curve.last().map_or(0.0, |p| p.step as f64))
        .collect();
    of_differences(per_seed, at)
}

/// The validation reading on spread windows, when every run of `pairs` has its score.
fn spread_reading(pairs: &[(&RunResult, &RunResult)]) -> Option<Reading> {
    let all = !pairs.is_empty()
        && pairs
            .iter()
            .all(|(v, s)| v.val_spread_loss.is_some() && s.val_spread_loss.is_some());
    all.then(|| final_reading(pairs, |r| r.val_spread_loss.unwrap_or(f64::NAN)))
}

/// Every variant's readings against softmax at every rung, from the selections (each
/// variant at its chosen rate) and the finished runs.
pub fn readings(
    plan: &super::LadderPlan,
    selections: &[Selection],
    results: &Results,
) -> Vec<RungReadings> {
    let chosen = |rung: &str, v: AttentionKind| {
        selections
            .iter()
            .find(|s| s.rung == rung && s.variant == v.name())
            .map(|s| s.chosen_lr)
    };
    let mut out = Vec::new();
    for rung in &plan.rungs {
        let Some(soft_lr) = chosen(&rung.name, AttentionKind::Softmax) else {
            continue;
        };
        for &v in plan
            .variants
            .iter()
            .filter(|&&v| v != AttentionKind::Softmax)
        {
            let Some(lr) = chosen(&rung.name, v) else {
                continue;
            };
            let pairs_at = |v_lr: f64, s_lr: f64| -> Vec<(&RunResult, &RunResult)> {
                plan.seeds
                    .iter()
                    .filter_map(|&s| {
                        // A diverged run (scored as chance) is no reading of either variant.
                        let a = results.get(&key(&rung.name, v, s, v_lr))?;
                        let b = results.get(&key(&rung.name, AttentionKind::Softmax, s, s_lr))?;
                        (a.diverged.is_none() && b.diverged.is_none()).then_some((a, b))
                    })
                    .collect()
            };
            let pairs = pairs_at(lr, soft_lr);
            // A matched reading needs every seed at that rate in both variants.
            let matched = |at: f64| {
                let p = pairs_at(at, at);
                (p.len() == plan.seeds.len()).then(|| final_reading(&p, |r| r.val_loss))
            };
            out.push(RungReadings {
                rung: rung.name.clone(),
                variant: v.name().to_string(),
                lr,
                softmax_lr: soft_lr,
                equal_steps: reading(&pairs, |p| p.step as f64),
                equal_flops: reading(&pairs, |p| p.flops as f64),
                equal_time: reading(&pairs, |p| p.seconds),
                validation: final_reading(&pairs, |r| r.val_loss),
                transfer: final_reading(&pairs, |r| r.transfer_loss),
                validation_spread: spread_reading(&pairs),
                matched_softmax_lr: matched(soft_lr),
                matched_variant_lr: matched(lr),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::ladder::result::CurvePoint;

    fn run(flops_per_step: u64, secs_per_step: f64, losses: &[f64]) -> RunResult {
        let curve = losses
            .iter()
            .enumerate()
            .map(|(i, &l)| CurvePoint {
                step: i as u64 * 10,
                tokens: i as u64 * 100,
                flops: i as u64 * 10 * flops_per_step,
                seconds: i as f64 * 10.0 * secs_per_step,
                heldout_loss: l,
            })
            .collect();
        RunResult {
            format: String::new(),
            version: 1,
            engine: String::new(),
            device: String::new(),
            rung: String::new(),
            variant: String::new(),
            seed: 0,
            lr: 0.0,
            params: crate::experiments::ladder::shape::Params {
                total: 0,
                trainable: 0,
                non_embedding: 0,
                trainable_non_embedding: 0,
            },
            steps: 20,
            tokens: 0,
            flops_per_step,
            flops: 0,
            seconds: 0.0,
            heldout_loss: 0.0,
            val_loss: 0.0,
            transfer_loss: 0.0,
            curve,
            spec_sha256: None,
            diverged: None,
            val_spread_loss: None,
        }
    }

    /// The variant costs half the FLOPs and twice the time per step: equal steps read both
    /// ends, equal FLOPs reads softmax half way, equal time reads the variant half way.
    #[test]
    fn each_reading_is_taken_where_the_cheaper_run_ends() {
        let v = run(1, 2.0, &[5.0, 4.0, 3.0]);
        let s = run(2, 1.0, &[5.0, 3.5, 2.5]);
        let pairs = [(&v, &s), (&v, &s)];
        let steps = reading(&pairs, |p| p.step as f64);
        assert!((steps.mean - 0.5).abs() < 1e-12 && steps.at == vec![20.0, 20.0]);
        let flops = reading(&pairs, |p| p.flops as f64);
        assert!((flops.mean - (3.0 - 3.5)).abs() < 1e-12, "{flops:?}");
        assert_eq!(flops.at[0], 20.0);
        let time = reading(&pairs, |p| p.seconds);
        assert!((time.mean - (4.0 - 2.5)).abs() < 1e-12, "{time:?}");
        // Identical differences: a zero-width interval around them.
        let i = time.interval.unwrap();
        assert!((i.lo - i.hi).abs() < 1e-12);
    }

    /// The final readings pair each seed's end-of-run losses, not the held-out curve.
    #[test]
    fn final_readings_pair_the_end_of_run_losses() {
        let (mut v0, mut s0) = (run(1, 1.0, &[5.0, 4.0]), run(1, 1.0, &[5.0, 1.0]));
        (v0.val_loss, s0.val_loss) = (3.0, 2.0);
        let (mut v1, mut s1) = (v0.clone(), s0.clone());
        (v1.val_loss, s1.val_loss) = (4.0, 2.0);
        let r = final_reading(&[(&v0, &s0), (&v1, &s1)], |r| r.val_loss);
        assert_eq!(r.per_seed, vec![1.0, 2.0]);
        assert!((r.mean - 1.5).abs() < 1e-12 && r.at == vec![10.0, 10.0]);
        let i = r.interval.unwrap();
        assert!(i.lo < 1.0 && i.hi > 2.0, "{i:?}");
    }
}
