//! A finished run: `result.json` in its folder (`docs/LADDER.md`, "`result.json`"), written by
//! either engine, read and checked here before anything is chosen or fitted from it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::shape::Params;
use crate::Result;
use crate::train::invalid;

/// The file of a finished run.
pub const RESULT_FILE: &str = "result.json";
/// `format` of a result.
pub const FORMAT: &str = "orthoformer-ladder-run";

/// One point of a run's held-out curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Optimizer steps done.
    pub step: u64,
    /// Training tokens seen.
    pub tokens: u64,
    /// Training FLOPs spent.
    pub flops: u64,
    /// Training seconds spent (evaluations excluded).
    pub seconds: f64,
    /// Mean loss on the curve's held-out windows.
    pub heldout_loss: f64,
}

/// A finished run's `result.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always 1.
    pub version: u32,
    /// `orthoformer-cpu` or `torch`.
    pub engine: String,
    /// What it ran on, in words.
    pub device: String,
    /// The rung's name.
    pub rung: String,
    /// The variant's name.
    pub variant: String,
    /// The seed.
    pub seed: u64,
    /// The peak learning rate.
    pub lr: f64,
    /// Parameter counts.
    pub params: Params,
    /// Optimizer steps.
    pub steps: u64,
    /// Training tokens.
    pub tokens: u64,
    /// Training FLOPs per step.
    pub flops_per_step: u64,
    /// Training FLOPs.
    pub flops: u64,
    /// Training wall time, evaluations excluded.
    pub seconds: f64,
    /// Mean loss on the held-out range's scored windows.
    pub heldout_loss: f64,
    /// Mean loss on `val.bin`'s scored windows.
    pub val_loss: f64,
    /// Mean loss on the transfer text's scored windows.
    pub transfer_loss: f64,
    /// The held-out curve.
    pub curve: Vec<CurvePoint>,
    /// The fingerprint of the settings it trained and was scored under
    /// ([`super::fingerprint`]); absent in results written before fingerprints, which are
    /// checked by their counts only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_sha256: Option<String>,
    /// Why the run diverged (its loss or gradient stopped being finite), when it did: such a
    /// run is finished, scored as chance (`ln V` for every loss, the worst a model can be
    /// without being wrong on purpose), never chosen, left out of every reading, and named
    /// in the report. `steps` is where it stopped; its curve holds the points before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverged: Option<String>,
    /// The loss on windows spread over the whole validation split, when the run was scored
    /// so ([`super::spread`]): read from its own file, never from `result.json`.
    #[serde(skip)]
    pub val_spread_loss: Option<f64>,
}

impl RunResult {
    /// Checks the values and that this is the run `spec` describes; `file` names it in the
    /// message.
    pub fn check(&self, spec: &super::runs::RunSpec, file: &Path) -> Result<()> {
        let why = if self.format != FORMAT || self.version != 1 {
            Some(format!("is not an {FORMAT} version 1 file"))
        } else if self.rung != spec.rung
            || self.variant != spec.variant.name()
            || self.seed != spec.seed
            || self.lr != spec.lr
        {
            Some(format!(
                "is the result of {} {} seed {} lr {}, not of the run its folder holds",
                self.rung, self.variant, self.seed, self.lr
            ))
        } else if let Some(why) = self
            .diverged
            .as_ref()
            .and_then(|_| self.diverged_differs(spec))
        {
            Some(why)
        } else if self.diverged.is_some() {
            None
        } else if self.steps != spec.steps as u64 {
            Some(format!(
                "has {} steps where the plan asks for {}",
                self.steps, spec.steps
            ))
        } else if let Some(why) = self.counts_differ(spec) {
            Some(why)
        } else if self
            .spec_sha256
            .as_ref()
            .is_some_and(|f| *f != spec.fingerprint)
        {
            Some(
                "was trained or scored under other settings than the plan's now (its \
                 fingerprint differs: the plan, the data or the library's accounting changed \
                 since)"
                    .to_string(),
            )
        } else if ![self.heldout_loss, self.val_loss, self.transfer_loss]
            .iter()
            .all(|l| l.is_finite() && *l >= 0.0)
        {
            Some("holds a loss that is not a finite number".to_string())
        } else if !(self.seconds.is_finite() && self.seconds >= 0.0) {
            Some(format!("holds the time {}", self.seconds))
        } else if self.curve.is_empty()
            || self.curve.windows(2).any(|w| {
                w[0].step >= w[1].step || w[0].flops > w[1].flops || w[0].seconds > w[1].seconds
            })
            || self
                .curve
                .iter()
                .any(|p| !(p.heldout_loss.is_finite() && p.seconds.is_finite()))
        {
            Some("holds a curve that is empty, not increasing or not finite".to_string())
        } else {
            None
        };
        match why {
            Some(why) => Err(invalid(format!(
                "{} {why}: delete it to train the run again",
                file.display()
            ))),
            None => Ok(()),
        }
    }
}

impl RunResult {
    /// Why a diverged result does not fit `spec`: it stopped past the run's end, a loss is
    /// not a number, or its fingerprint is another run's.
    fn diverged_differs(&self, spec: &super::runs::RunSpec) -> Option<String> {
        if self.steps > spec.steps as u64 {
            Some(format!(
                "stopped at step {} of a run of {} steps",
                self.steps, spec.steps
            ))
        } else if ![self.heldout_loss, self.val_loss, self.transfer_loss]
            .iter()
            .all(|l| l.is_finite() && *l >= 0.0)
        {
            Some("holds a loss that is not a finite number".to_string())
        } else if self
            .spec_sha256
            .as_ref()
            .is_some_and(|f| *f != spec.fingerprint)
        {
            Some("was trained under other settings than the plan's now".to_string())
        } else {
            None
        }
    }

    /// Why the counts this result states differ from what the library computes for `spec`
    /// (parameters, tokens, FLOPs, the curve's steps), if they do.
    fn counts_differ(&self, spec: &super::runs::RunSpec) -> Option<String> {
        let steps = spec.steps as u64;
        let curve: Vec<u64> = self.curve.iter().map(|p| p.step).collect();
        let want: Vec<u64> = spec.curve_steps.iter().map(|&s| s as u64).collect();
        if self.params != spec.params {
            Some(format!(
                "states parameters {:?} where the run has {:?}",
                self.params, spec.params
            ))
        } else if self.flops_per_step != spec.flops_per_step
            || Some(self.flops) != steps.checked_mul(spec.flops_per_step)
        {
            Some(format!(
                "states {} FLOPs per step and {} in all where the run has {} per step over {steps} \
                 steps",
                self.flops_per_step, self.flops, spec.flops_per_step
            ))
        } else if Some(self.tokens) != steps.checked_mul(spec.tokens_per_step) {
            Some(format!(
                "states {} training tokens where the run has {} per step over {steps} steps",
                self.tokens, spec.tokens_per_step
            ))
        } else if curve != want {
            Some(format!(
                "has its curve at steps {curve:?} where the plan scores it at {want:?}"
            ))
        } else {
            None
        }
    }
}

/// The result in `dir`, checked against `spec`; `None` when the run is unfinished.
pub fn read(dir: &Path, spec: &super::runs::RunSpec) -> Result<Option<RunResult>> {
    let path = dir.join(RESULT_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let bytes =
        crate::io::safe_file::read_in_at_most(dir, RESULT_FILE, super::plan::MAX_JSON_BYTES)?;
    let r: RunResult = serde_json::from_slice(&bytes).map_err(|e| {
        invalid(format!(
            "{} is unreadable ({e}): delete it to train the run again",
            path.display()
        ))
    })?;
    r.check(spec, &path)?;
    Ok(Some(r))
}

/// Writes `r` as `dir/result.json`, atomically.
pub fn write(dir: &Path, r: &RunResult) -> Result<()> {
    let json = serde_json::to_vec_pretty(r)
        .map_err(|e| invalid(format!("serialising {RESULT_FILE}: {e}")))?;
    crate::io::write_atomic_bytes(&dir.join(RESULT_FILE), &json)
}
