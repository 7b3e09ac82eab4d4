//! `orthoformer quantize` as one library operation: [`run`] checks a [`QuantizeJob`], then
//! either runs the quantisation study (the perplexity of each configuration on each text,
//! with the activation statistics: [`super::quant_study`]) or, with `out`, writes the
//! quantised model as a GGUF file ([`super::quantize_file`]). The command line only parses its
//! flags into a job, calls [`run`] and prints the report.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::RotateError;
use super::quant_options::{MIN_CALIB_TOKENS, QuantizeOptions};
use super::quant_report::QuantReport;
use super::quant_study::{QuantConfig, StudyText, run_study, study_tokens};
use super::quantize_file::{self, QuantizeFileReport};
use crate::infer::text::{read_tail_tokens, read_tokens, text_name};
use crate::model::llama::load_model;
use crate::quant::{FileType, TensorOverride};

/// What to quantise, on which texts, and whether to write the result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantizeJob {
    /// The model: a `.gguf` file or a Hugging Face folder.
    pub model: PathBuf,
    /// Texts to measure perplexity on (empty: the embedded TinyShakespeare); the first also
    /// gives the calibration tokens.
    pub data: Vec<PathBuf>,
    /// The configurations, methods, seeds and settings.
    pub options: QuantizeOptions,
    /// Write the quantised model as this `.gguf` file instead of running the study (then
    /// `gguf_type` is needed).
    pub out: Option<PathBuf>,
    /// The block format or mix of `out` (see [`FileType::names`]).
    pub gguf_type: Option<FileType>,
    /// Per-tensor formats of `out` that replace the mix's choice (`PATTERN=TYPE`).
    pub tensor_types: Vec<TensorOverride>,
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

fn invalid(msg: &str) -> crate::Error {
    RotateError::Invalid(msg.into()).into()
}

impl QuantizeJob {
    /// Checks the job's own values (before any file is read), naming the field.
    pub fn validate(&self) -> crate::Result<()> {
        self.options.validate()?;
        let o = &self.options;
        match (&self.out, self.gguf_type) {
            (Some(out), Some(f)) => quantize_file::validate(o, out, f),
            (Some(_), None) => Err(invalid("`out` needs `gguf_type`, its block format")),
            (None, Some(_)) => Err(invalid("`gguf_type` applies to `out` only")),
            (None, None) if !self.tensor_types.is_empty() => {
                Err(invalid("`tensor_type` applies to `out` only"))
            }
            (None, None) if o.sequential => Err(invalid(
                "`sequential` calibrates a file's layers one by one: use it with `out`",
            )),
            (None, None) => match o.method.iter().find(|m| m.needs_block_format()) {
                Some(m) => Err(invalid(&format!(
                    "`method` {}: llama.cpp's block-scale search rounds onto a GGUF block \
                     format; use it with `out` and `gguf_type`",
                    m.label()
                ))),
                None => Ok(()),
            },
        }
    }

    /// The first text (the calibration text), `None` for the embedded corpus.
    pub fn first_text(&self) -> Option<&Path> {
        self.data.first().map(PathBuf::as_path)
    }

    /// The calibration tokens: about the last `calib_tokens` tokens of the first text,
    /// disjoint from the first tokens perplexity is measured on.
    pub fn calibration(&self, tok: &crate::data::Tokenizer) -> crate::Result<Vec<u32>> {
        read_tail_tokens(
            tok,
            self.first_text(),
            self.options.calib_tokens,
            MIN_CALIB_TOKENS,
        )
    }
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
        (Some(out), Some(ft)) => Ok(QuantizeOutcome::Written(Box::new(quantize_file::write(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bad job is refused before a file is read, naming its field.
    #[test]
    fn bad_jobs_name_their_field() {
        let ok = QuantizeJob {
            model: "no-such-model.gguf".into(),
            ..QuantizeJob::default()
        };
        assert!(ok.validate().is_ok());
        let file = |f: &dyn Fn(&mut QuantizeJob)| {
            let mut j = QuantizeJob {
                out: Some("q.gguf".into()),
                gguf_type: Some(FileType::Single(crate::quant::Format::Q4_0)),
                ..ok.clone()
            };
            f(&mut j);
            j.validate()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(file(&|_| {}), "");
        type Change<'a> = &'a dyn Fn(&mut QuantizeJob);
        let cases: [(Change, &str); 10] = [
            (&|j| j.gguf_type = None, "`gguf_type`"),
            (&|j| j.options.table = true, "`table`"),
            (&|j| j.options.abits = 8, "`abits`"),
            (&|j| j.options.kv_bits = 4, "`kv_bits`"),
            (&|j| j.options.seed = vec![0, 1], "`seed`"),
            (&|j| j.options.wbits = 8, "`wbits`"),
            (&|j| j.options.study.group = 64, "`group`"),
            (&|j| j.out = Some("q.bin".into()), "`out`"),
            (&|j| j.options.study.gptq.damp = -1.0, "`damp`"),
            (&|j| j.options.study.weight_asym = true, "`weight_asym`"),
        ];
        for (change, field) in cases {
            let e = file(change);
            assert!(e.contains(field), "{field}: {e:?}");
        }
        let study = QuantizeJob {
            gguf_type: Some(FileType::Single(crate::quant::Format::Q8_0)),
            ..ok.clone()
        };
        assert!(study.validate().unwrap_err().to_string().contains("`out`"));
        let few = QuantizeJob {
            options: QuantizeOptions {
                calib_tokens: 3,
                ..QuantizeOptions::default()
            },
            ..ok
        };
        assert!(
            few.validate()
                .unwrap_err()
                .to_string()
                .contains("`calib_tokens`")
        );
    }
}
