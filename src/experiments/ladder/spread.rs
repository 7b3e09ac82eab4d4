//! Validation on windows spread over the whole split. A run's `val_loss` scores the first
//! `eval_tokens` of `val.bin`, which in a sorted corpus (a dictionary) is one slice of its
//! ordering. This scores a finished run's saved model on as many windows, placed evenly from
//! the first token of `val.bin` to its last, and keeps the loss in `validation-spread.json`
//! beside `result.json`, tied to the run by its fingerprint. The report reads it as one more
//! reading ([`super::readings`]) once both runs of every pair have it.
//!
//! Before scoring, the saved model is checked to be the one the result scored: its loss on the
//! result's own validation windows must give the recorded `val_loss` again.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::data::{self, Tokens};
use super::engine::{score, score_windows};
use super::runs::RunSpec;
use super::{LadderPlan, result};
use crate::Result;
use crate::model::Gpt;
use crate::train::invalid;

/// The file beside `result.json`.
pub const SPREAD_FILE: &str = "validation-spread.json";
/// `format` of the file.
pub const FORMAT: &str = "orthoformer-ladder-validation-spread";
/// The largest relative difference between the recorded `val_loss` and the saved model's
/// loss on the same windows (the same code on the same bits gives the same loss; the
/// margin covers a thread count that sums the batch in another order).
const SAME_MODEL: f64 = 1e-5;

/// A run's loss on windows spread over the whole validation split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpreadScore {
    /// Always [`FORMAT`].
    pub format: String,
    /// The fingerprint of the run it scores ([`super::fingerprint`]).
    pub spec_sha256: String,
    /// Tokens per window (inputs; each window reads one more as its last target).
    pub context: usize,
    /// Windows scored.
    pub windows: usize,
    /// Tokens of `val.bin`, the span the windows cover.
    pub split_tokens: usize,
    /// Mean loss per token over the windows.
    pub loss: f64,
}

/// The starts of `k` windows of `t + 1` tokens placed evenly over `len` tokens: the first at
/// 0, the last ending at `len`. Empty when no window fits.
pub fn starts(len: usize, k: usize, t: usize) -> Vec<usize> {
    let Some(room) = len.checked_sub(t + 1) else {
        return Vec::new();
    };
    match k {
        0 => Vec::new(),
        1 => vec![0],
        _ => (0..k)
            .map(|i| ((i as u128 * room as u128) / (k as u128 - 1)) as usize)
            .collect(),
    }
}

/// The spread score of the run in `dir` (its validation split `val_tokens` long), if it has
/// one; one of another run (its fingerprint differs), one whose counts are not those the run
/// scores (context, windows, the split's tokens) or whose loss is not a finite number at
/// least zero, or an unreadable file, is refused by name.
pub fn read(dir: &Path, spec: &RunSpec, val_tokens: usize) -> Result<Option<SpreadScore>> {
    let path = dir.join(SPREAD_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let bytes =
        crate::io::safe_file::read_in_at_most(dir, SPREAD_FILE, super::plan::MAX_JSON_BYTES)?;
    let s: SpreadScore = serde_json::from_slice(&bytes).map_err(|e| {
        invalid(format!(
            "{} is unreadable ({e}): delete it and score again with `orthoformer ladder \
             --spread-validation`",
            path.display()
        ))
    })?;
    // The windows [`of_model`] places: as many as the first-slice reading scores.
    let t = spec.context.max(1);
    let windows = starts(
        val_tokens,
        spec.final_ranges.val[1].saturating_sub(1) / t,
        t,
    )
    .len();
    let counts = (s.context, s.windows, s.split_tokens) == (spec.context, windows, val_tokens);
    if s.format != FORMAT
        || s.spec_sha256 != spec.fingerprint
        || !counts
        || !(s.loss.is_finite() && s.loss >= 0.0)
    {
        return Err(invalid(format!(
            "{} is not the spread validation of this run (format, fingerprint, counts or \
             loss): delete it and score again with `orthoformer ladder --spread-validation`",
            path.display()
        )));
    }
    Ok(Some(s))
}

/// What [`score_all`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SpreadOutcome {
    /// Runs scored now.
    pub scored: usize,
    /// Runs that had their score already.
    pub kept: usize,
    /// Finished runs with no model of the Rust engine in their folder (trained elsewhere, or
    /// copied without their checkpoint), named.
    pub without_model: Vec<String>,
    /// Runs not finished, or diverged: nothing to score.
    pub skipped: usize,
}

/// Scores every finished run of the ladder in `out` that has its saved model and no spread
/// score yet; `each(done, total, run)` reports progress.
pub fn score_all(out: &Path, each: &mut dyn FnMut(usize, usize, &str)) -> Result<SpreadOutcome> {
    let plan = super::read(out)?;
    let status = super::status(&plan, out)?;
    let tokens = data::load(&plan, out)?;
    let mut outcome = SpreadOutcome::default();
    let total = status.len();
    for (i, (spec, r)) in status.iter().enumerate() {
        each(i, total, &spec.dir);
        let dir = Path::new(&spec.dir);
        let Some(r) = r.as_ref().filter(|r| r.diverged.is_none()) else {
            outcome.skipped += 1;
            continue;
        };
        // `status` has read and checked the run's spread file already.
        if r.val_spread_loss.is_some() {
            outcome.kept += 1;
            continue;
        }
        if !crate::train::checkpoint::exists(dir)? {
            outcome.without_model.push(spec.dir.clone());
            continue;
        }
        write(dir, &score_run(&plan, &tokens, spec, r)?)?;
        outcome.scored += 1;
    }
    each(total, total, "");
    Ok(outcome)
}

/// The spread score of the finished run `spec` (result `r`) from its saved model, after
/// checking that the model gives the result's validation loss again.
fn score_run(
    plan: &LadderPlan,
    tokens: &Tokens,
    spec: &RunSpec,
    r: &result::RunResult,
) -> Result<SpreadScore> {
    let dir = Path::new(&spec.dir);
    let (_, mut model): (_, Gpt) = crate::train::checkpoint::load_with_model(dir)?;
    let want: crate::model::GptConfig = serde_json::from_value(spec.model.clone())
        .map_err(|e| invalid(format!("the run's model is not a GPT configuration: {e}")))?;
    if model.config() != &want {
        return Err(invalid(format!(
            "{} holds a model of another configuration than its run",
            dir.display()
        )));
    }
    let [a, z] = spec.final_ranges.val;
    let first = tokens
        .val
        .get(a..z)
        .ok_or_else(|| invalid("the validation range is outside val.bin"))?;
    let again = score(&mut model, first, spec.context, spec.batch)?;
    if (again - r.val_loss).abs() > SAME_MODEL * r.val_loss.abs().max(1.0) {
        return Err(invalid(format!(
            "{}: the saved model scores {again} on the result's validation windows where the \
             result says {}: the checkpoint is not the model that was scored",
            dir.display(),
            r.val_loss
        )));
    }
    of_model(plan, tokens, spec, &mut model)
}

/// The spread score of `model`, the finished model of run `spec`.
fn of_model(
    plan: &LadderPlan,
    tokens: &Tokens,
    spec: &RunSpec,
    model: &mut Gpt,
) -> Result<SpreadScore> {
    let t = spec.context;
    let k = data::whole_windows(tokens.val.len(), plan.eval_tokens, t).saturating_sub(1) / t.max(1);
    let at = starts(tokens.val.len(), k, t);
    if at.is_empty() {
        return Err(invalid("val.bin holds no whole window"));
    }
    Ok(SpreadScore {
        format: FORMAT.to_string(),
        spec_sha256: spec.fingerprint.clone(),
        context: t,
        windows: at.len(),
        split_tokens: tokens.val.len(),
        loss: score_windows(model, &tokens.val, &at, t, spec.batch)?,
    })
}

/// Scores `model`, the finished model of run `spec`, and writes its file: the engine does
/// this as a run finishes, so a result never needs its checkpoint again for this reading.
pub fn write_for(
    plan: &LadderPlan,
    tokens: &Tokens,
    spec: &RunSpec,
    model: &mut Gpt,
) -> Result<()> {
    write(Path::new(&spec.dir), &of_model(plan, tokens, spec, model)?)
}

/// Writes `s` as `dir`'s spread file, atomically.
fn write(dir: &Path, s: &SpreadScore) -> Result<()> {
    let json = serde_json::to_vec_pretty(s)
        .map_err(|e| invalid(format!("serialising {SPREAD_FILE}: {e}")))?;
    crate::io::write_atomic_bytes(&dir.join(SPREAD_FILE), &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_span_the_whole_split() {
        let s = starts(1000, 5, 9);
        assert_eq!(s.first(), Some(&0));
        assert_eq!(s.last().map(|&x| x + 10), Some(1000));
        assert!(s.windows(2).all(|w| w[1] > w[0]));
        assert_eq!(starts(10, 3, 9), vec![0, 0, 0]);
        assert!(starts(9, 3, 9).is_empty());
        assert_eq!(starts(100, 1, 9), vec![0]);
    }
}
