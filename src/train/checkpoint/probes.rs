//! `orthoformer eval --checkpoint` with probes: the checkpoint's evaluation ([`super::eval`])
//! and, on request, its loss at each position of the window
//! ([`crate::infer::eval::positions`]) and the induction-head probe
//! ([`crate::infer::eval::induction`]), in one report.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::eval::prepare;
use crate::Result;
use crate::infer::eval::induction::{self, InductionOptions, InductionReport};
use crate::infer::eval::{PositionLoss, evaluate_by_position};
use crate::infer::eval_job::{EvalJob, timed};
use crate::infer::eval_report::CheckpointEval;
use crate::io::table::{Block, Report};

/// Which probes run beside the evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probes {
    /// The mean loss at each position of the window.
    pub by_position: bool,
    /// The induction probe, with its draws (`batch` is replaced by the training batch).
    pub induction: Option<InductionOptions>,
}

/// The evaluation of a checkpoint with the probes asked for (JSON: the evaluation's fields,
/// then `by_position` and `induction` when present).
#[derive(Debug, Clone, Serialize)]
pub struct ProbedEval {
    /// The evaluation.
    #[serde(flatten)]
    pub eval: CheckpointEval,
    /// Loss by position in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_position: Option<PositionLoss>,
    /// The induction probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub induction: Option<InductionReport>,
}

impl Report for ProbedEval {
    fn blocks(&self) -> Vec<Block> {
        let mut out = self.eval.blocks();
        if let Some(p) = &self.by_position {
            out.extend(p.blocks());
        }
        if let Some(i) = &self.induction {
            out.extend(i.blocks());
        }
        out
    }
}

/// Evaluates the checkpoint in `dir` as `job` says ([`super::eval::run`]), with `probes`.
/// `progress(scored, total)` counts the evaluation's tokens.
pub fn run(
    dir: &Path,
    job: &EvalJob,
    probes: &Probes,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ProbedEval> {
    let mut p = prepare(dir, job)?;
    // Refused before the (long) evaluation: a length that does not fit the context.
    let induction_options = probes.induction.map(|o| InductionOptions {
        batch: p.options.batch,
        ..o
    });
    if let Some(o) = &induction_options {
        o.resolve(p.model.config().context)?;
    }
    let (report, by_position, seconds) = if probes.by_position {
        let total = p.tokens.len().saturating_sub(1);
        let start = Instant::now();
        let (report, by) = evaluate_by_position(&mut p.model, &p.tokens, &p.options, &mut |n| {
            progress(n, total)
        })?;
        if !report.loss.is_finite() {
            return Err(crate::train::invalid(format!(
                "the loss over {} tokens is {} (the model's weights hold NaN or infinity, or \
                 its logits overflow): no evaluation to report",
                report.tokens, report.loss
            )));
        }
        (report, Some(by), start.elapsed().as_secs_f64())
    } else {
        let (report, seconds) = timed(&mut p.model, &p.tokens, &p.options, progress)?;
        (report, None, seconds)
    };
    let induction = match &induction_options {
        Some(o) => Some(induction::probe(
            &mut p.model,
            o,
            &p.loaded.tokenizer.end_ids(),
        )?),
        None => None,
    };
    Ok(ProbedEval {
        eval: p.report(dir, report, seconds),
        by_position,
        induction,
    })
}
