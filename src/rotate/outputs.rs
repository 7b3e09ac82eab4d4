//! `rotate`'s outputs: written staged ([`Staged`]), checked as written (each staged output is
//! read back and run against the original model, so `--gguf-type f16`'s rounding is part of
//! the check), and moved into place only when every check passed.

use super::out_path::is_gguf;

use super::RotateError;
use super::check::{Comparison, compare_models};
use super::staging::Staged;
use crate::data::Tokenizer;
use crate::export::llama::{save_gguf, save_hf_folder};
use crate::io::finite::check_holds;
use crate::io::gguf::{GgmlType, Value};
use crate::model::llama::special_tokens::SpecialTokens;
use crate::model::llama::{Llama, LlamaWeights, load_model};

/// Refuses weights an F16 file cannot hold: a finite value that f16 rounds to infinity
/// (beyond 65504) would be written as infinity and run as NaN, a silently different model.
/// Norm weights and biases are written F32 and only checked for finiteness.
pub(crate) fn check_f16_range(w: &LlamaWeights) -> crate::Result<()> {
    check_holds_as(w, GgmlType::F16)
}

/// Refuses weights that matrices stored as `ty` (vectors as F32) cannot hold, naming the
/// tensor ([`check_holds`]: NaN, infinity, beyond f16's range): nothing is written.
fn check_holds_as(w: &LlamaWeights, ty: GgmlType) -> crate::Result<()> {
    for (name, shape, data) in w.hf_tensors() {
        let stored = if shape.len() < 2 { GgmlType::F32 } else { ty };
        check_holds(&name, data, stored).map_err(|e| match stored {
            GgmlType::F16 => RotateError::Invalid(format!("`gguf_type` f16: {e}")),
            _ => RotateError::Invalid(e),
        })?;
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
    /// The metadata of GGUF outputs: the source GGUF's, or a folder's tokenizer as GGUF
    /// (`gguf_vocab::source_metadata`; empty without a GGUF output).
    pub gguf_metadata: &'a [(String, Value)],
}

/// Writes every output staged, once the weights are known to fit every output's types
/// (a model holding NaN is never written); nothing is in place yet.
pub(crate) fn stage(
    outs: &[std::path::PathBuf],
    s: &Source,
    ty: GgmlType,
) -> crate::Result<Vec<Staged>> {
    for out in outs {
        check_holds_as(s.weights, if is_gguf(out) { ty } else { GgmlType::F32 })?;
    }
    let mut staged = Vec::with_capacity(outs.len());
    for out in outs {
        let st = Staged::new(out)?;
        if is_gguf(out) {
            save_gguf(s.weights, s.gguf_metadata, st.path(), ty)?;
            check_tokenizer_read_back(st.path(), s.tokenizer, out)?;
        } else {
            save_hf_folder(s.weights, s.tokenizer, s.special, st.path())?;
        }
        staged.push(st);
    }
    Ok(staged)
}

/// Refuses a GGUF file whose tokenizer, read back as the engine reads it, differs from the
/// source's (`gguf_vocab_check`): a conversion that lost or moved a token is never committed.
pub(crate) fn check_tokenizer_read_back(
    staged: &std::path::Path,
    source: &Tokenizer,
    out: &std::path::Path,
) -> crate::Result<()> {
    let g = crate::io::gguf::GgufFile::open(staged)?;
    let written = crate::model::llama::tokenizer::tokenizer_from_gguf(&g)?;
    match crate::model::llama::gguf_vocab_check::difference(source, &written, "") {
        None => Ok(()),
        Some(why) => Err(RotateError::Invalid(format!(
            "the GGUF tokenizer written for {} differs from the model's ({why}): nothing \
             written (a converter bug; please report it with the model's tokenizer.json)",
            out.display()
        ))
        .into()),
    }
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
        if worst.as_ref().is_none_or(|w| {
            c.max_abs_logit_diff.is_nan() || c.max_abs_logit_diff > w.max_abs_logit_diff
        }) {
            worst = Some(c);
        }
    }
    worst.ok_or_else(|| RotateError::Invalid("no output to check".into()).into())
}
