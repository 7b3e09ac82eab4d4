//! `rotate`'s outputs: written staged ([`Staged`]), checked as written (each staged output is
//! read back and run against the original model, so `--gguf-type f16`'s rounding is part of
//! the check), and moved into place only when every check passed.

use std::path::Path;

use super::RotateError;
use super::check::{Comparison, compare_models};
use super::staging::Staged;
use crate::data::Tokenizer;
use crate::export::llama::{save_gguf, save_hf_folder};
use crate::io::gguf::{GgmlType, Value};
use crate::model::llama::special_tokens::SpecialTokens;
use crate::model::llama::{Llama, LlamaWeights, load_model};

/// The largest finite f16.
const F16_MAX: f32 = 65504.0;

/// A path ending in `.gguf` is a GGUF output; anything else a Hugging Face folder.
pub(crate) fn is_gguf(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "gguf")
}

/// Refuses weights an F16 file cannot hold: a finite value beyond ±65504 would be written as
/// infinity (and run as NaN), a silently different model. Norm weights are written F32 and
/// not checked.
pub(crate) fn check_f16_range(w: &LlamaWeights) -> crate::Result<()> {
    for (name, shape, data) in w.hf_tensors() {
        if shape.len() < 2 {
            continue;
        }
        if let Some(x) = data.iter().find(|x| x.is_finite() && x.abs() > F16_MAX) {
            return Err(RotateError::Invalid(format!(
                "`gguf_type` f16: tensor {name} holds {x}, beyond f16's largest value 65504 (it \
                 would be written as infinity); write f32"
            ))
            .into());
        }
    }
    Ok(())
}

/// What the outputs are written from: the rotated weights and the source's tokenizer.
pub(crate) struct Source<'a> {
    /// The rotated weights.
    pub weights: &'a LlamaWeights,
    /// The tokenizer.
    pub tokenizer: &'a Tokenizer,
    /// Its special tokens.
    pub special: &'a SpecialTokens,
    /// The source GGUF's metadata (empty for a folder).
    pub gguf_metadata: &'a [(String, Value)],
}

/// Writes every output staged; nothing is in place yet.
pub(crate) fn stage(
    outs: &[std::path::PathBuf],
    s: &Source,
    ty: GgmlType,
) -> crate::Result<Vec<Staged>> {
    let mut staged = Vec::with_capacity(outs.len());
    for out in outs {
        let st = Staged::new(out)?;
        if is_gguf(out) {
            save_gguf(s.weights, s.gguf_metadata, st.path(), ty)?;
        } else {
            save_hf_folder(s.weights, s.tokenizer, s.special, st.path())?;
        }
        staged.push(st);
    }
    Ok(staged)
}

/// Runs `original` against each staged output as read back from disk, on `ids`; returns the
/// comparison with the largest max |Δlogit|. `progress(done, total)` counts scored tokens
/// over every comparison.
pub(crate) fn check_staged(
    original: &mut Llama,
    staged: &[Staged],
    ids: &[u32],
    context: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> crate::Result<Comparison> {
    let per = 2 * (ids.len() - 1);
    let total = per * staged.len();
    let mut worst: Option<Comparison> = None;
    for (i, st) in staged.iter().enumerate() {
        let written = load_model(st.path())?.weights;
        let mut b = Llama::new(written);
        let c = compare_models(original, &mut b, ids, context, &mut |n| {
            progress(i * per + n, total)
        })?;
        if worst
            .as_ref()
            .is_none_or(|w| c.max_abs_logit_diff > w.max_abs_logit_diff)
        {
            worst = Some(c);
        }
    }
    worst.ok_or_else(|| RotateError::Invalid("no output to check".into()).into())
}
