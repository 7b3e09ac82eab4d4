//! `orthoformer eval --checkpoint` as one library operation: loss, perplexity and bits per
//! character (char tokenizer), byte (BPE, Hugging Face) or token (ids only) of a trained
//! checkpoint, on the validation split of its training text (or of its token folder) by
//! default, or on any UTF-8 file (`data`), through the one evaluation
//! ([`crate::infer::eval_job::timed`]).

use crate::error::one_line;
use std::path::Path;

use super::{Loaded, load_with_model};
use crate::Result;
use crate::data::{Corpus, token_files};
use crate::infer::eval::{EvalOptions, EvalReport};
use crate::infer::eval_job::{EvalJob, timed};
use crate::infer::eval_report::CheckpointEval;
use crate::model::Gpt;
use crate::train::prepared::reopen_text;

fn invalid(msg: String) -> crate::Error {
    crate::train::invalid(msg)
}

/// Evaluates the checkpoint in `dir` as `job` says (its windows are the model's context, its
/// batches the training batch). `progress(scored, total)` counts tokens.
pub fn run(
    dir: &Path,
    job: &EvalJob,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<CheckpointEval> {
    let mut p = prepare(dir, job)?;
    let (report, seconds) = timed(&mut p.model, &p.tokens, &p.options, progress)?;
    Ok(p.report(dir, report, seconds))
}

/// A checkpoint's model and the text its evaluation scores, with the windows and batches.
pub(super) struct Prepared {
    /// The checkpoint's state and tokenizer.
    pub(super) loaded: Loaded,
    /// Its model.
    pub(super) model: Gpt,
    /// Windows of the model's context, batches of the training batch, the job's limits.
    pub(super) options: EvalOptions,
    /// The token ids to score.
    pub(super) tokens: Vec<u32>,
    /// What they are, in words.
    data: String,
    /// Characters, bytes or ids per token of that text.
    units_per_token: f64,
}

impl Prepared {
    /// The report of an evaluation of this text.
    pub(super) fn report(&self, dir: &Path, report: EvalReport, seconds: f64) -> CheckpointEval {
        CheckpointEval {
            checkpoint: dir.to_path_buf(),
            data: self.data.clone(),
            step: self.loaded.state_file.step,
            tokenizer: self.loaded.tokenizer.name(),
            tokens_per_second: report.tokens as f64 / seconds,
            report: report.with_units(self.units_per_token, self.loaded.tokenizer.unit()),
            seconds,
        }
    }
}

/// Checks `job`, reads the checkpoint and the text to score.
pub(super) fn prepare(dir: &Path, job: &EvalJob) -> Result<Prepared> {
    if job.max_tokens.is_some() || job.context.is_some() {
        return Err(invalid(
            "`max_tokens` and `context` apply to `model` only; use `eval_iters` to evaluate \
             fewer batches"
                .into(),
        ));
    }
    job.options(EvalOptions::default())?;
    // One read of the model, verified against the manifest and the state's configuration.
    let (loaded, model) = load_with_model(dir)?;
    let st = &loaded.state_file;
    let options = job.options(EvalOptions {
        batch: st.options.batch,
        ..EvalOptions::default()
    })?;
    let tok = &loaded.tokenizer;
    let (tokens, text_desc, units_per) = match &job.data {
        Some(path) => {
            let corpus = Corpus::load(path)?;
            let tokens = tok
                .encode(&corpus.text)
                .map_err(|e| invalid(format!("tokenizing {}: {}", path.display(), one_line(&e))))?;
            let upt = tok.units_per_token(&corpus.text, tokens.len());
            (tokens, path.display().to_string(), upt)
        }
        None if token_files::is_token_folder(Path::new(&st.data.source)) => {
            // Trained on prepared token files: their validation file, checked to be the
            // checkpoint's as resume checks it (SHA-256); its text (for bits per unit) is what
            // the checkpoint's tokenizer decodes it to.
            // Only the ids are needed (an ids-only folder, trained by the Python trainer,
            // has no tokenizer.json), so the folder is read here, not as resume reopens it.
            let folder = Path::new(&st.data.source);
            let data = token_files::read_folder(folder).map_err(|e| {
                invalid(format!(
                    "reading the token folder {} that checkpoint {} was trained on: {}",
                    folder.display(),
                    dir.display(),
                    one_line(&e)
                ))
            })?;
            if data.meta.sha256 != st.data.sha256 {
                return Err(invalid(format!(
                    "the token folder {} is not the one checkpoint {} was trained on (SHA-256 \
                     of its token files differs): restore the original folder",
                    folder.display(),
                    dir.display()
                )));
            }
            let val = data.val;
            let upt = tok.units_per_token(&tok.decode(&val)?, val.len());
            (val, format!("val.bin of {}", folder.display()), upt)
        }
        None => {
            let corpus = if st.data.source == crate::data::corpus::TINY_SHAKESPEARE_NAME {
                Corpus::tiny_shakespeare()
            } else {
                Corpus::load(Path::new(&st.data.source)).map_err(|e| {
                    invalid(format!(
                        "the checkpoint's training text is needed for its validation split; \
                         pass `data`: {}",
                        one_line(&e)
                    ))
                })?
            };
            let source = corpus.source.clone();
            // The recorded text, checked to be the checkpoint's as resume checks it (SHA-256).
            let split = reopen_text(dir, corpus, st, tok)?.split;
            // Units of the validation part itself (BPE bytes per token vary along a text).
            let upt = tok.units_per_token(&tok.decode(&split.val)?, split.val.len());
            (split.val, format!("validation split of {source}"), upt)
        }
    };
    Ok(Prepared {
        loaded,
        model,
        options,
        tokens,
        data: text_desc,
        units_per_token: units_per,
    })
}
