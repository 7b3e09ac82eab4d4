//! The ladder's report (`docs/LADDER.md`, "The report"): the selection, the fits, the
//! effective parameter multiplier and the readings, as `report.json`, a Markdown table
//! (`report.md`) and two plots, written together as one file set.
//!
//! Fits and multipliers use the validation loss of each rung's and seed's run at the chosen
//! rate (never the held-out loss the rate was chosen on, which is biased low by the choice):
//! `L(N)` over the trainable non-embedding parameters, `L(C)` over training FLOPs, by
//! `analysis::scaling` (least squares, percentile bootstrap over seeds, 90%, 1000 draws,
//! seed 0), and per seed with Student t intervals (`uncertainty.rs`). A rung whose seeds
//! spread more than `uncertainty::UNREADABLE_SD` at the chosen rates is left out of every fit
//! and multiplier, and named. A fit the data cannot support (fewer than 3 rungs, one seed,
//! losses that do not fall) is reported with its reason instead of its coefficients.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::plan::LadderPlan;
use super::readings::{self, RungReadings};
use super::result::RunResult;
use super::runs::RunSpec;
use super::select::{self, Results, Selection, key};
use super::shape::Params;
use super::uncertainty::{self, Uncertainty};
use crate::Result;
use crate::analysis::scaling::{
    FitWithIntervals, MultiplierReport, Observation, fit_with_bootstrap, multiplier,
};
use crate::model::AttentionKind;
use crate::train::invalid;

/// The report's JSON file.
pub const REPORT_FILE: &str = "report.json";
/// The report's table.
pub const TABLE_FILE: &str = "report.md";
/// `format` of the report.
pub const FORMAT: &str = "orthoformer-ladder-report";
/// Bootstrap draws of every fit and multiplier.
pub const DRAWS: usize = 1000;
/// The two-sided level of the fits' and multipliers' intervals.
pub const LEVEL: f64 = 0.9;

/// One rung and seed at a variant's chosen rate: a point of the fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The rung.
    pub rung: String,
    /// The variant.
    pub variant: String,
    /// The seed.
    pub seed: u64,
    /// The chosen rate.
    pub lr: f64,
    /// Parameter counts.
    pub params: Params,
    /// Training FLOPs.
    pub flops: u64,
    /// Training tokens.
    #[serde(default)]
    pub tokens: u64,
    /// Training seconds.
    pub seconds: f64,
    /// Held-out loss.
    pub heldout_loss: f64,
    /// Validation loss (what the fits use).
    pub val_loss: f64,
    /// Transfer loss.
    pub transfer_loss: f64,
}

/// A fit, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitOutcome {
    /// The fit with its intervals.
    pub fit: Option<FitWithIntervals>,
    /// Why it could not be made.
    pub error: Option<String>,
}

/// One variant's fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantFits {
    /// The variant.
    pub variant: String,
    /// `L(N) = E + A·N^(−α)`, N trainable non-embedding parameters.
    pub params: FitOutcome,
    /// `L(C) = E + B·C^(−β)`, C training FLOPs.
    pub flops: FitOutcome,
}

/// One frozen variant's effective parameter multiplier against softmax.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantMultiplier {
    /// The variant.
    pub variant: String,
    /// The multiplier at every rung, with its trend.
    pub report: Option<MultiplierReport>,
    /// Why it could not be made.
    pub error: Option<String>,
}

/// `report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always 1.
    pub version: u32,
    /// The normalised plan (with the rates added).
    pub plan: LadderPlan,
    /// The engines whose results the report holds.
    pub engines: Vec<String>,
    /// The devices they ran on.
    pub devices: Vec<String>,
    /// Every rung and variant: every rate's losses, the chosen rate and its edge.
    pub selection: Vec<Selection>,
    /// Rung × variant choices still at an edge of their rates.
    pub at_edge: usize,
    /// The fits' points.
    pub points: Vec<Point>,
    /// Per variant.
    pub fits: Vec<VariantFits>,
    /// Per variant other than softmax.
    pub multipliers: Vec<VariantMultiplier>,
    /// Per rung and variant other than softmax.
    pub readings: Vec<RungReadings>,
    /// The rungs left out of the fits by the stated rule, per-seed fits and multipliers with
    /// t intervals, the multiplier over both parameter counts, tokens per parameter.
    #[serde(default)]
    pub uncertainty: Uncertainty,
    /// Rungs left out because some of their runs (or a rate that is due) are unfinished:
    /// empty unless the report was asked for with `partial` ([`build_partial`]).
    #[serde(default)]
    pub unfinished: Vec<String>,
    /// Runs that diverged, as `rung variant lr seed: why` (scored as chance, never chosen,
    /// in no reading).
    #[serde(default)]
    pub diverged: Vec<String>,
}

/// Every run of a plan with its result, `None` while it is unfinished ([`super::status`]).
type RunStatus = Vec<(RunSpec, Option<RunResult>)>;

/// The plan of the ladder in `out` with every rate that is due, and the status of its runs.
/// Due rates are added in memory only: a report never writes the plan.
fn plan_and_status(out: &Path) -> Result<(LadderPlan, RunStatus)> {
    let mut plan = super::read_for_report(out)?;
    let status = super::extend_due(&mut plan, out, false)?;
    Ok((plan, status))
}

/// The report of the finished ladder in `out` (every run finished, no rate due).
pub fn build(out: &Path) -> Result<Report> {
    let (plan, status) = plan_and_status(out)?;
    let pending: Vec<_> = status.iter().filter(|(_, r)| r.is_none()).collect();
    if let Some((first, _)) = pending.first() {
        return Err(invalid(format!(
            "{} of the ladder's runs are unfinished (the first: {}): train them first with \
             `orthoformer ladder --resume --out {}` or python -m orthoformer.ladder",
            pending.len(),
            first.dir,
            out.display()
        )));
    }
    let results = super::results(&status);
    Ok(assemble(plan, &results))
}

/// The report of the rungs of the ladder in `out` whose runs are all finished, with no rate
/// due (the others named in [`Report::unfinished`]): a reading of a ladder still training, or
/// of one continued elsewhere. Reads `out` only: rates that are due are added in memory, not
/// written to `ladder.json`, so it may run beside the engine that trains the ladder.
pub fn build_partial(out: &Path) -> Result<Report> {
    let (plan, status) = plan_and_status(out)?;
    let mut unfinished: Vec<String> = Vec::new();
    for (spec, r) in &status {
        if r.is_none() && !unfinished.contains(&spec.rung) {
            unfinished.push(spec.rung.clone());
        }
    }
    if unfinished.len() == plan.rungs.len() {
        return Err(invalid(format!(
            "no rung of the ladder in {} is finished yet: a partial report needs every run of \
             at least one rung",
            out.display()
        )));
    }
    let mut results = super::results(&status);
    results.retain(|(rung, ..), _| !unfinished.contains(rung));
    let mut report = assemble(plan, &results);
    report.unfinished = unfinished;
    Ok(report)
}

/// The report from the finished runs `results` of `plan`.
pub fn assemble(plan: LadderPlan, results: &Results) -> Report {
    let mut selection = Vec::new();
    for rung in &plan.rungs {
        for &v in &plan.variants {
            if let Some(s) = select::select(&plan, &rung.name, v, results) {
                selection.push(s);
            }
        }
    }
    let points = chosen_points(&plan, &selection, results);
    let unreadable = uncertainty::unreadable(&points);
    let readable: Vec<Point> = points
        .iter()
        .filter(|p| !unreadable.iter().any(|u| u.rung == p.rung))
        .cloned()
        .collect();
    let mut engines: Vec<String> = results.values().map(|r| r.engine.clone()).collect();
    engines.sort();
    engines.dedup();
    let mut devices: Vec<String> = results.values().map(|r| r.device.clone()).collect();
    devices.sort();
    devices.dedup();
    let obs = |v: AttentionKind, x: fn(&Point) -> f64| -> Vec<Observation> {
        uncertainty::observations(&readable, v, x)
    };
    let by_params = |p: &Point| p.params.trainable_non_embedding as f64;
    let by_flops = |p: &Point| p.flops as f64;
    let outcome = |o: Result<FitWithIntervals>| match o {
        Ok(f) => FitOutcome {
            fit: Some(f),
            error: None,
        },
        Err(e) => FitOutcome {
            fit: None,
            error: Some(crate::error::one_line(&e)),
        },
    };
    let fits = plan
        .variants
        .iter()
        .map(|&v| VariantFits {
            variant: v.name().to_string(),
            params: outcome(fit_with_bootstrap(&obs(v, by_params), DRAWS, 0, LEVEL)),
            flops: outcome(fit_with_bootstrap(&obs(v, by_flops), DRAWS, 0, LEVEL)),
        })
        .collect();
    let reference = obs(AttentionKind::Softmax, by_params);
    let multipliers = plan
        .variants
        .iter()
        .filter(|&&v| v != AttentionKind::Softmax)
        .map(
            |&v| match multiplier(&reference, &obs(v, by_params), DRAWS, 0, LEVEL) {
                Ok(r) => VariantMultiplier {
                    variant: v.name().to_string(),
                    report: Some(r),
                    error: None,
                },
                Err(e) => VariantMultiplier {
                    variant: v.name().to_string(),
                    report: None,
                    error: Some(crate::error::one_line(&e)),
                },
            },
        )
        .collect();
    let readings = readings::readings(&plan, &selection, results);
    let uncertainty = uncertainty::assess(&plan.variants, &readable, &points, unreadable);
    Report {
        format: FORMAT.to_string(),
        version: 1,
        engines,
        devices,
        at_edge: selection.iter().filter(|s| s.edge.is_some()).count(),
        selection,
        points,
        fits,
        multipliers,
        readings,
        uncertainty,
        plan,
        unfinished: Vec::new(),
        diverged: results
            .values()
            .filter_map(|r| {
                let why = r.diverged.as_ref()?;
                Some(format!(
                    "{} {} lr {} seed {}: {why}",
                    r.rung, r.variant, r.lr, r.seed
                ))
            })
            .collect(),
    }
}

/// Every rung's and seed's run at each variant's chosen rate.
fn chosen_points(plan: &LadderPlan, selection: &[Selection], results: &Results) -> Vec<Point> {
    let mut out = Vec::new();
    for s in selection {
        let Ok(v) = AttentionKind::parse(&s.variant) else {
            continue;
        };
        for &seed in &plan.seeds {
            let Some(r): Option<&RunResult> = results.get(&key(&s.rung, v, seed, s.chosen_lr))
            else {
                continue;
            };
            out.push(Point {
                rung: s.rung.clone(),
                variant: s.variant.clone(),
                seed,
                lr: s.chosen_lr,
                params: r.params,
                flops: r.flops,
                tokens: r.tokens,
                seconds: r.seconds,
                heldout_loss: r.heldout_loss,
                val_loss: r.val_loss,
                transfer_loss: r.transfer_loss,
            });
        }
    }
    out
}
