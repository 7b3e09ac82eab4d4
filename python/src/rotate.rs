//! Rotation of a pretrained Llama-style model (`orthoformer::rotate`), as `orthoformer rotate`
//! does it: load a GGUF or Hugging Face folder, fold the RMSNorm weights, rotate the residual
//! stream by a Haar-random or randomised Hadamard orthogonal matrix (f64), write GGUF files
//! and/or Hugging Face folders, and optionally compare the logits of both models on a text.

use std::path::PathBuf;

use pyo3::prelude::*;

use orthoformer::export::llama::{save_gguf, save_hf_folder};
use orthoformer::io::gguf::GgmlType;
use orthoformer::model::llama::tokenizer::encode;
use orthoformer::model::llama::{Llama, load_model};
use orthoformer::rotate::check::compare_models;
use orthoformer::rotate::{Rotation, fold_norms, rotate_weights};

use crate::error::{OrPy, guard, value};

/// What `--check` compares on: a text file, how many tokens, which window.
type Check = (PathBuf, usize, usize);

/// Rotates `model` into every path of `outs` (a path ending in `.gguf` is a GGUF file of
/// `gguf_type` `f32`/`f16`, anything else a Hugging Face folder). `rotation` is `hadamard` or
/// `random`. With `check = (text, tokens, context)` both models are run on the first `tokens`
/// tokens of `text` and compared. Returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (model, outs, rotation="hadamard", seed=0, gguf_type="f32", check=None))]
fn rotate_model(
    py: Python<'_>,
    model: PathBuf,
    outs: Vec<PathBuf>,
    rotation: &str,
    seed: u64,
    gguf_type: &str,
    check: Option<Check>,
) -> PyResult<String> {
    if outs.is_empty() && check.is_none() {
        return Err(value(
            "nothing to do: pass out=PATH (folder or .gguf) and/or check",
        ));
    }
    let ty = match gguf_type {
        "f32" => GgmlType::F32,
        "f16" => GgmlType::F16,
        other => return Err(value(format!("gguf_type {other:?}: use f32 or f16"))),
    };
    if !matches!(rotation, "hadamard" | "random") {
        return Err(value(format!(
            "rotation {rotation:?}: use hadamard or random"
        )));
    }
    py.detach(|| guard(|| run(&model, &outs, rotation, seed, ty, check)))
}

fn run(
    model: &std::path::Path,
    outs: &[PathBuf],
    rotation: &str,
    seed: u64,
    ty: GgmlType,
    check: Option<Check>,
) -> PyResult<String> {
    let loaded = load_model(model).or_py()?;
    let mut w = loaded.weights.clone();
    let was_tied = w.lm_head.is_none();
    let c = w.cfg.d_model;
    let r = if rotation == "random" {
        Rotation::random(c, seed)
    } else {
        Rotation::hadamard(c, seed)
    }
    .or_py()?;
    fold_norms(&mut w);
    rotate_weights(&mut w, &r).or_py()?;
    for out in outs {
        if out.extension().is_some_and(|e| e == "gguf") {
            let meta = loaded.gguf_metadata.as_deref().unwrap_or(&[]);
            save_gguf(&w, meta, out, ty).or_py()?;
        } else {
            save_hf_folder(&w, &loaded.tokenizer, &loaded.special, out).or_py()?;
        }
    }
    let comparison = match check {
        None => None,
        Some((text, tokens, context)) => {
            let bytes = orthoformer::io::safe_file::read_regular(&text).or_py()?;
            // A prefix is plenty: about 4 bytes per token, with a margin (as the CLI does).
            let cut = bytes.len().min(tokens.saturating_mul(8).saturating_add(64));
            let mut ids =
                encode(&loaded.tokenizer, &String::from_utf8_lossy(&bytes[..cut])).or_py()?;
            ids.truncate(tokens.saturating_add(1));
            if ids.len() < 2 {
                return Err(value(format!(
                    "{} has fewer than 2 tokens of text",
                    text.display()
                )));
            }
            let mut a = Llama::new(loaded.weights);
            let mut b = Llama::new(w);
            Some(compare_models(&mut a, &mut b, &ids, context.max(2), &mut |_| {}).or_py()?)
        }
    };
    let report = serde_json::json!({
        "model": model.display().to_string(),
        "rotation": rotation,
        "seed": seed,
        "width": c,
        "lm_head_untied_by_fold": was_tied,
        "outputs": outs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "check": comparison,
    });
    Ok(report.to_string())
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rotate_model, m)?)?;
    Ok(())
}
