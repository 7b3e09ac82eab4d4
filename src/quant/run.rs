//! `orthoformer quantize` as one library operation: [`run`] checks a [`QuantizeJob`], then
//! either runs the quantisation study (the perplexity of each configuration on each text,
//! with the activation statistics: [`super::study`]) or, with `out`, writes the quantised
//! model as a GGUF file ([`super::file`]). The command line only parses its flags into a job,
//! calls [`run`] and prints the report.

use std::path::Path;

use serde::Serialize;

use super::QuantError;
use super::file::{self, QuantizeFileReport};
use super::job::QuantizeJob;
use super::study::{QuantConfig, QuantReport, StudyText, run_study, study_tokens};
use crate::infer::text::{read_tokens, text_name};
use crate::model::llama::load_model;

fn invalid(msg: &str) -> crate::Error {
    QuantError::Invalid(msg.into()).into()
}

/// What [`run`] did.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum QuantizeOutcome {
    /// The study's report.
    Study(Box<QuantReport>),
    /// The file written, and how it compares with the model in memory.
    Written(Box<QuantizeFileReport>),
}

/// Runs the job: the study, or with `out` the file. `on_progress(done, total)` counts the
/// tokens the study has scored, or the layers the file's quantisation has finished.
pub fn run(
    job: &QuantizeJob,
    on_progress: &mut dyn FnMut(usize, usize),
) -> crate::Result<QuantizeOutcome> {
    job.validate()?;
    // Before any weight is expanded to f32: a model too large for the memory is refused here.
    super::memory_need::check_quantize(job)?;
    match (&job.out, job.gguf_type) {
        (Some(out), Some(ft)) => Ok(QuantizeOutcome::Written(Box::new(file::write(
            job,
            out,
            ft,
            on_progress,
        )?))),
        _ => Ok(QuantizeOutcome::Study(Box::new(study(job, on_progress)?))),
    }
}

/// The study of a valid job without `out`.
fn study(job: &QuantizeJob, on_tokens: &mut dyn FnMut(usize, usize)) -> crate::Result<QuantReport> {
    let o = &job.options;
    let data: Vec<Option<&Path>> = if job.data.is_empty() {
        vec![None]
    } else {
        job.data.iter().map(|p| Some(p.as_path())).collect()
    };
    let loaded = load_model(&job.model)?;
    if o.study.context > loaded.weights.cfg.max_context {
        return Err(invalid(&format!(
            "`context` {} exceeds the model's {}",
            o.study.context, loaded.weights.cfg.max_context
        )));
    }
    let texts: Vec<Vec<u32>> = data
        .iter()
        .map(|p| read_tokens(&loaded.tokenizer, *p, o.max_tokens))
        .collect::<crate::Result<_>>()?;
    let configs = o.configs();
    let study_texts: Vec<StudyText<'_>> = texts
        .iter()
        .zip(&data)
        .map(|(t, p)| StudyText {
            name: text_name(*p),
            tokens: t,
        })
        .collect();
    let total = study_tokens(&configs, &study_texts, &o.seed);
    let calib = if configs.iter().any(QuantConfig::calibrates) {
        job.calibration(&loaded.tokenizer)?
    } else {
        Vec::new()
    };
    let (rows, activation_stats) = run_study(
        &loaded.weights,
        &configs,
        &study_texts,
        o.study,
        &o.seed,
        &calib,
        &mut |n| on_tokens(n, total),
    )?;
    Ok(QuantReport::new(
        job.model.display().to_string(),
        study_texts.iter().map(|t| t.name.clone()).collect(),
        o.max_tokens,
        o.study,
        o.seed.clone(),
        calib.len(),
        rows,
        activation_stats,
    ))
}
