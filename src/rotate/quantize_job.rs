//! `orthoformer quantize` as one library operation: [`run`] checks a [`QuantizeJob`], then
//! either runs the quantisation study (perplexity of each configuration on each text, with
//! the activation statistics: [`super::quant_study`]) or, with `out`, writes the quantised
//! model as a GGUF file ([`super::quantize_out`]). The command line only parses its flags
//! into a job, calls [`run`] and prints the report.

use std::path::{Path, PathBuf};

use super::RotateError;
use super::quant_options::{MIN_CALIB_TOKENS, QuantizeOptions};
use super::quant_study::{NOTE, QuantReport, StudyText, run_study};
use super::quantize_out::{self, QuantizeOutReport};
use crate::infer::text::{read_tail_tokens, read_tokens, text_name};
use crate::model::llama::load_model;
use crate::quant::Format;

/// What to quantise, on which texts, and whether to write the result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantizeJob {
    /// The model: a `.gguf` file or a Hugging Face folder.
    pub model: PathBuf,
    /// Texts to measure perplexity on (empty: the embedded TinyShakespeare); the first also
    /// gives the calibration tokens.
    pub data: Vec<PathBuf>,
    /// The study's configuration and settings.
    pub options: QuantizeOptions,
    /// Write the quantised model as this GGUF file instead of running the study (then
    /// `gguf_type` is needed).
    pub out: Option<PathBuf>,
    /// The block format of `out`.
    pub gguf_type: Option<Format>,
}

/// What [`run`] did.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(untagged)]
pub enum QuantizeOutcome {
    /// The study's report.
    Study(Box<QuantReport>),
    /// The file written.
    Written(Box<QuantizeOutReport>),
}

fn invalid(msg: &str) -> crate::Error {
    crate::Error::Rotate(RotateError::Invalid(msg.into()))
}

impl QuantizeJob {
    /// Checks the job's own values (before any file is read).
    pub fn validate(&self) -> crate::Result<()> {
        self.options.validate()?;
        match (&self.out, self.gguf_type) {
            (Some(out), Some(f)) => quantize_out::validate(&self.options, out, f),
            (Some(_), None) => Err(invalid("`out` needs `gguf_type`, its block format")),
            (None, Some(_)) => Err(invalid("`gguf_type` applies to `out` only")),
            (None, None) => Ok(()),
        }
    }

    /// The first text (the calibration text), `None` for the embedded corpus.
    fn first_text(&self) -> Option<&Path> {
        self.data.first().map(PathBuf::as_path)
    }
}

/// Runs the job; `progress(done, total)` counts the tokens the study has scored.
pub fn run(
    job: &QuantizeJob,
    progress: &mut dyn FnMut(usize, usize),
) -> crate::Result<QuantizeOutcome> {
    job.validate()?;
    if let (Some(out), Some(f)) = (&job.out, job.gguf_type) {
        let report = quantize_out::write(&job.model, job.first_text(), &job.options, out, f)?;
        return Ok(QuantizeOutcome::Written(Box::new(report)));
    }
    let o = &job.options;
    let data: Vec<Option<&Path>> = if job.data.is_empty() {
        vec![None]
    } else {
        job.data.iter().map(|p| Some(p.as_path())).collect()
    };
    let loaded = load_model(&job.model)?;
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
    let per_config: usize = texts.iter().map(|t| t.len().saturating_sub(1)).sum();
    let total = per_config.saturating_mul(configs.len());
    let calib = if o.needs_calibration() {
        read_tail_tokens(&loaded.tokenizer, data[0], o.calib_tokens, MIN_CALIB_TOKENS)?
    } else {
        Vec::new()
    };
    let (rows, activation_stats) = run_study(
        &loaded.weights,
        &configs,
        &study_texts,
        o.study,
        &calib,
        &mut |n| progress(n, total),
    )?;
    Ok(QuantizeOutcome::Study(Box::new(QuantReport {
        model: job.model.display().to_string(),
        note: NOTE,
        data: study_texts.iter().map(|t| t.name.clone()).collect(),
        tokens_per_text: o.max_tokens,
        context: o.study.context,
        group: o.study.group,
        weights: o.study.weights,
        rows,
        activation_stats,
    })))
}
