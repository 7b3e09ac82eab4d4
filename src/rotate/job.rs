//! `orthoformer rotate` as one library operation: [`run`] validates a [`RotateJob`], loads
//! the model, folds its RMSNorm weights, rotates its residual stream, optionally checks on a
//! text that the logits did not change, and writes the outputs. The command line and the
//! Python package only parse their arguments into a job, call [`run`] and print its
//! [`RotateReport`], so both refuse the same inputs with the same messages.
//!
//! Messages name the job's fields in backticks (`` `context` ``); each front end writes them
//! as its own argument names (`--context`, `context=`), see [`crate::error::name_fields`].

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use super::RotateError;
use super::check::{Comparison, compare_models};
use super::options::RotateOptions;
use super::out_path::claim_outs;
use super::out_path::is_gguf;
use super::outputs::{Source, check_f16_range, check_staged, stage};
use super::rotation::RotationKind;
use super::set::{RotateChoice, RotationSet, apply_offline};
use crate::infer::text::{check_cache_fits, read_tokens};
use crate::io::gguf::provenance::set_record;
use crate::io::gguf::{GgmlType, Value};
use crate::io::memory::{bytes, check_fits};
use crate::model::llama::gguf_vocab::source_metadata;
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
    /// The model tied `lm_head` to the embedding and folding its final norm untied it (the
    /// norm's weight is not constant, so it cannot stay in front of a shared matrix).
    pub lm_head_untied_by_fold: bool,
    /// What untying costs: the values of the head's own matrix (`V x C`; 0 when still tied).
    pub lm_head_untie_values: u64,
    /// The paths written (none when the check failed: the previous outputs are unchanged).
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
        validate_check(o.tolerance, o.check_tokens, o.context)?;
    }
    Ok(())
}

/// Checks a logit check's own values: a finite tolerance >= 0, at least 2 tokens (each token
/// after the first is scored) and a window of at least 2.
pub(crate) fn validate_check(
    tolerance: f64,
    tokens: usize,
    context: Option<usize>,
) -> crate::Result<()> {
    if !(tolerance.is_finite() && tolerance >= 0.0) {
        return Err(invalid(format!(
            "`tolerance` {tolerance} must be a finite number >= 0 (max |Δlogit| allowed)"
        )));
    }
    if tokens < 2 {
        return Err(invalid(format!(
            "`check_tokens` must be at least 2 (got {tokens}): a check scores each token after \
             the first"
        )));
    }
    if let Some(c) = context
        && c < 2
    {
        return Err(invalid(format!("`context` must be at least 2 (got {c})")));
    }
    Ok(())
}

/// The first `n` tokens of `data` that a logit check of `loaded` scores, and the window it
/// scores them in (`context`, or the default window clamped to the model's context), once
/// the window, its cache and the kept logits are known to fit.
pub(crate) fn check_tokens(
    loaded: &crate::model::llama::LoadedModel,
    data: Option<&std::path::Path>,
    context: Option<usize>,
    n: usize,
) -> crate::Result<(Vec<u32>, usize)> {
    let max = loaded.weights.cfg.max_context;
    let context = super::options::window_or(context, super::options::CHECK_WINDOW, max);
    if context > max {
        return Err(invalid(format!(
            "`context` {context} exceeds the model's {max}"
        )));
    }
    check_cache_fits(&loaded.weights.cfg, context)?;
    let ids = read_tokens(&loaded.tokenizer, data, n)?;
    // The comparison keeps the original model's logits for every scored token.
    let v = loaded.weights.cfg.vocab_size;
    check_fits(
        bytes(&[ids.len(), v, 4]),
        format_args!(
            "`check` on {} tokens (their logits over {v} tokens)",
            ids.len()
        ),
    )?;
    Ok((ids, context))
}

/// Rotates `job.model` as [`RotateJob`] says. Every input, `out` included, is checked before
/// the model is loaded. Outputs are written staged and, with `check`, read back and compared
/// with the original: they are moved into place only when the check passes, so a failed or
/// erring check leaves the previous outputs as they were. A check whose logits are not
/// finite is an error. `progress(done, total)` counts the tokens the check has scored.
pub fn run(job: &RotateJob, progress: &mut dyn FnMut(usize, usize)) -> crate::Result<RotateReport> {
    validate(job)?;
    let o = &job.options;
    // Held until the outputs are in place: no other process writes them meanwhile.
    let _claim = claim_outs(
        &job.model,
        &job.data.as_deref().into_iter().collect::<Vec<_>>(),
        &job.out,
    )?;
    // Before any weight is expanded to f32: a model too large for the memory is refused here.
    super::memory_need::check_rotate(&job.model, &job.out)?;
    let t0 = Instant::now();
    let loaded = load_model(&job.model)?;
    let t_load = t0.elapsed().as_secs_f64();
    // Before any work: a folder whose tokenizer llama.cpp would run differently is refused.
    let gguf_metadata = if job.out.iter().any(|p| is_gguf(p)) {
        source_metadata(&job.model, &loaded)?
    } else {
        Vec::new()
    };
    let check_ids = if job.check {
        Some(check_tokens(
            &loaded,
            job.data.as_deref(),
            o.context,
            o.check_tokens,
        )?)
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
    // A GGUF output says which rotation it holds, drawn from which seed.
    let mut gguf_metadata = gguf_metadata;
    if !gguf_metadata.is_empty() {
        set_record(
            &mut gguf_metadata,
            "orthoformer.rotate.",
            vec![
                ("rotation", Value::Str(set.label())),
                (
                    "rotation.kind",
                    Value::Str(format!("{:?}", set.residual).to_lowercase()),
                ),
                ("seed", Value::U64(o.seed)),
            ],
        );
    }
    let untied = was_tied && w.lm_head.is_some();
    let loaded_vocab = w.cfg.vocab_size;
    let t_rot = t1.elapsed().as_secs_f64();
    if o.gguf_type == GgmlType::F16 && job.out.iter().any(|p| is_gguf(p)) {
        check_f16_range(&w)?;
    }
    let t2 = Instant::now();
    let source = Source {
        weights: &w,
        tokenizer: &loaded.tokenizer,
        special: &loaded.special,
        gguf_metadata: &gguf_metadata,
    };
    let staged = stage(&job.out, &source, o.gguf_type)?;
    let t_write = t2.elapsed().as_secs_f64();
    let check = match check_ids {
        None => None,
        Some((ids, window)) => {
            let mut original = Llama::new(loaded.weights);
            Some(if staged.is_empty() {
                let total = 2 * (ids.len() - 1);
                let mut b = Llama::new(w);
                compare_models(&mut original, &mut b, &ids, window, &mut |n| {
                    progress(n, total)
                })?
            } else {
                // What is checked is what was written, read back: not the weights in memory.
                drop(w);
                check_staged(&mut original, &staged, &ids, window, progress)?
            })
        }
    };
    let check_passed = check
        .as_ref()
        .map(|c: &Comparison| c.max_abs_logit_diff <= o.tolerance);
    let mut outputs = Vec::new();
    if check_passed != Some(false) {
        for (st, out) in staged.into_iter().zip(&job.out) {
            st.commit()?;
            outputs.push(out.display().to_string());
        }
    }
    // A failed check drops `staged` here: every staged output is removed.
    Ok(RotateReport {
        model: job.model.display().to_string(),
        rotation: o.rotation,
        seed: o.seed,
        heads: o.heads,
        width: c,
        lm_head_untied_by_fold: untied,
        lm_head_untie_values: if untied {
            (loaded_vocab as u64) * (c as u64)
        } else {
            0
        },
        outputs,
        seconds_load: t_load,
        seconds_fold_rotate: t_rot,
        seconds_write: t_write,
        check,
        check_passed,
    })
}
