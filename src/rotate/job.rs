//! `orthoformer rotate` as one library operation: [`run`] validates a [`RotateJob`], loads
//! the model, folds its RMSNorm weights, rotates its residual stream, optionally checks on a
//! text that the logits did not change, and writes the outputs. The command line and the
//! Python package only parse their arguments into a job, call [`run`] and print its
//! [`RotateReport`], so both refuse the same inputs with the same messages.
//!
//! Messages name the job's fields in backticks (`` `context` ``); each front end writes them
//! as its own argument names (`--context`, `context=`), see [`crate::error::name_fields`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::RotateError;
use super::check::{Comparison, compare_models};
use super::options::RotateOptions;
use super::rotation::RotationKind;
use super::set::{RotateChoice, RotationSet, apply_offline};
use crate::export::llama::{save_gguf, save_hf_folder};
use crate::infer::text::{check_cache_fits, read_tokens};
use crate::io::folder_kind::{self, FolderKind};
use crate::io::memory::{bytes, check_fits};
use crate::model::llama::{Llama, load_model};

/// What to rotate, where to write it, and whether to check it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RotateJob {
    /// The model to rotate: a `.gguf` file or a Hugging Face folder.
    pub model: PathBuf,
    /// Where to write: a path ending in `.gguf` is a GGUF file, anything else a Hugging Face
    /// folder. Empty: nothing is written (then `check` must be set).
    pub out: Vec<PathBuf>,
    /// Run the original and the rotated model on a text and compare their logits.
    pub check: bool,
    /// The text of the check (`None`: the embedded TinyShakespeare).
    pub data: Option<PathBuf>,
    /// The rotation, its seed, the GGUF type and the check's size and tolerance.
    pub options: RotateOptions,
}

/// What [`run`] did.
#[derive(Clone, Debug, Serialize)]
pub struct RotateReport {
    /// The model rotated, as given.
    pub model: String,
    /// The kind of orthogonal matrix.
    pub rotation: RotationKind,
    /// Its seed.
    pub seed: u64,
    /// Whether the value heads were rotated too (`R2`).
    pub heads: bool,
    /// The model width `C` (the order of the rotation).
    pub width: usize,
    /// The model tied `lm_head` to the embedding; folding the final norm untied it.
    pub lm_head_untied_by_fold: bool,
    /// The paths written.
    pub outputs: Vec<String>,
    /// Seconds loading the model.
    pub seconds_load: f64,
    /// Seconds folding and rotating.
    pub seconds_fold_rotate: f64,
    /// Seconds writing the outputs.
    pub seconds_write: f64,
    /// The comparison of the logits, when checked.
    pub check: Option<Comparison>,
    /// Whether max |Δlogit| stayed within the tolerance, when checked.
    pub check_passed: Option<bool>,
}

fn invalid(msg: String) -> crate::Error {
    crate::Error::Rotate(RotateError::Invalid(msg))
}

/// Checks the job's own values (before any file is read).
pub fn validate(job: &RotateJob) -> crate::Result<()> {
    let o = &job.options;
    if job.out.is_empty() && !job.check {
        return Err(invalid(
            "nothing to do: give `out` (a folder or .gguf path) and/or `check`".into(),
        ));
    }
    if !matches!(
        o.gguf_type,
        crate::io::gguf::GgmlType::F32 | crate::io::gguf::GgmlType::F16
    ) {
        return Err(invalid(format!(
            "`gguf_type` {:?}: a rotated model is written as f32 or f16",
            o.gguf_type
        )));
    }
    if job.check {
        if !(o.tolerance.is_finite() && o.tolerance >= 0.0) {
            return Err(invalid(format!(
                "`tolerance` {} must be a finite number >= 0 (max |Δlogit| allowed)",
                o.tolerance
            )));
        }
        if o.check_tokens == 0 {
            return Err(invalid("`check_tokens` must be at least 1".into()));
        }
        if o.context < 2 {
            return Err(invalid(format!(
                "`context` must be at least 2 (got {})",
                o.context
            )));
        }
    }
    Ok(())
}

/// Rotates `job.model` as [`RotateJob`] says. Every input is checked before anything is
/// written; a check whose logits are not finite is an error and nothing is written.
/// `progress(done, total)` counts the tokens the check has scored over both models.
pub fn run(job: &RotateJob, progress: &mut dyn FnMut(usize, usize)) -> crate::Result<RotateReport> {
    validate(job)?;
    let o = &job.options;
    // A folder output must not be another command's folder (a training checkpoint, a
    // download): checked before the model is loaded and rotated.
    for out in job.out.iter().filter(|p| !is_gguf(p)) {
        folder_kind::check(out, FolderKind::HfLlama)?;
    }
    let t0 = Instant::now();
    let loaded = load_model(&job.model)?;
    let t_load = t0.elapsed().as_secs_f64();
    let check_ids = if job.check {
        let max = loaded.weights.cfg.max_context;
        if o.context > max {
            return Err(invalid(format!(
                "`context` {} exceeds the model's {max}",
                o.context
            )));
        }
        check_cache_fits(&loaded.weights.cfg, o.context)?;
        let ids = read_tokens(&loaded.tokenizer, job.data.as_deref(), o.check_tokens)?;
        // The comparison keeps the original model's logits for every scored token.
        let v = loaded.weights.cfg.vocab_size;
        check_fits(
            bytes(&[ids.len(), v, 4]),
            format_args!(
                "`check` on {} tokens (their logits over {v} tokens)",
                ids.len()
            ),
        )?;
        Some(ids)
    } else {
        None
    };
    let t1 = Instant::now();
    let mut w = loaded.weights.clone();
    let was_tied = w.lm_head.is_none();
    let c = w.cfg.d_model;
    let set = RotationSet {
        heads: o.heads,
        ..RotationSet::residual(match o.rotation {
            RotationKind::Random => RotateChoice::Random,
            RotationKind::Hadamard => RotateChoice::Hadamard,
        })
    };
    apply_offline(&mut w, &set, o.seed)?;
    let t_rot = t1.elapsed().as_secs_f64();
    // With outputs to write, the check runs on a copy.
    let (for_check, for_writes) = match (&check_ids, job.out.is_empty()) {
        (Some(_), false) => {
            let bytes: usize = w.hf_tensors().iter().map(|t| t.2.len() * 4).sum();
            check_fits(
                Some(bytes),
                format_args!("`check` beside `out` (a copy of the rotated weights)"),
            )?;
            (Some(w.clone()), Some(w))
        }
        (Some(_), true) => (Some(w), None),
        (None, _) => (None, Some(w)),
    };
    let mut check = None;
    if let (Some(ids), Some(rotated)) = (check_ids, for_check) {
        let total = 2 * (ids.len() - 1);
        let mut a = Llama::new(loaded.weights);
        let mut b = Llama::new(rotated);
        check = Some(compare_models(&mut a, &mut b, &ids, o.context, &mut |n| {
            progress(n, total)
        })?);
    }
    let t2 = Instant::now();
    // `for_writes` is `None` only when there is no `out`.
    for (out, w) in job.out.iter().zip(for_writes.iter().cycle()) {
        if is_gguf(out) {
            let meta = loaded.gguf_metadata.as_deref().unwrap_or(&[]);
            save_gguf(w, meta, out, o.gguf_type)?;
        } else {
            save_hf_folder(w, &loaded.tokenizer, &loaded.special, out)?;
        }
    }
    let t_write = t2.elapsed().as_secs_f64();
    let check_passed = check
        .as_ref()
        .map(|c: &Comparison| c.max_abs_logit_diff <= o.tolerance);
    Ok(RotateReport {
        model: job.model.display().to_string(),
        rotation: o.rotation,
        seed: o.seed,
        heads: o.heads,
        width: c,
        lm_head_untied_by_fold: was_tied,
        outputs: job.out.iter().map(|p| p.display().to_string()).collect(),
        seconds_load: t_load,
        seconds_fold_rotate: t_rot,
        seconds_write: t_write,
        check,
        check_passed,
    })
}

/// A path ending in `.gguf` is a GGUF output; anything else a Hugging Face folder.
fn is_gguf(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "gguf")
}
