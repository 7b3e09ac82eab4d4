//! Rotation of a pretrained Llama-style model: the library's one operation,
//! [`orthoformer::rotate::run`], called with Python's arguments (the command line calls the
//! same, so both refuse the same inputs with the same messages).

use std::path::PathBuf;

use pyo3::prelude::*;

use orthoformer::rotate::options::{RotateOptions, WeightAlignOptions, gguf_type_named};
use orthoformer::rotate::weight_align::WeightAlignJob;
use orthoformer::rotate::{RotateJob, RotationKind};

use crate::error::{OrPy, compute};

/// Rotates `model` into every path of `outs` (a path ending in `.gguf` is a GGUF file of
/// `gguf_type` `f32`/`f16`, anything else a Hugging Face folder). `rotation` is `hadamard` or
/// `random`. With `check`, both models are run on the first `check_tokens` tokens of `data`
/// (`None`: the embedded TinyShakespeare) in windows of `context` and compared, and the check
/// fails past `tolerance`. Returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (model, outs, rotation="hadamard", seed=0, gguf_type="f32", check=false,
    data=None, check_tokens=None, context=None, tolerance=None))]
#[allow(clippy::too_many_arguments)]
fn rotate_model(
    py: Python<'_>,
    model: PathBuf,
    outs: Vec<PathBuf>,
    rotation: &str,
    seed: u64,
    gguf_type: &str,
    check: bool,
    data: Option<PathBuf>,
    check_tokens: Option<usize>,
    context: Option<usize>,
    tolerance: Option<f64>,
) -> PyResult<String> {
    let d = RotateOptions::default();
    let job = RotateJob {
        model,
        out: outs,
        check,
        data,
        options: RotateOptions {
            rotation: rotation.parse::<RotationKind>().or_py()?,
            seed,
            heads: d.heads,
            gguf_type: gguf_type_named(gguf_type).or_py()?,
            check_tokens: check_tokens.unwrap_or(d.check_tokens),
            context: context.or(d.context),
            tolerance: tolerance.unwrap_or(d.tolerance),
        },
    };
    let report = compute(py, || {
        orthoformer::rotate::run(&job, &mut |_, _| {}).or_py()
    })?;
    serde_json::to_string(&report).map_err(|e| crate::error::value(e.to_string()))
}

/// Aligns `model_b`'s weights to `model`'s (`align --weights`): the residual map of kind
/// `residual` (`rotation`, `permutation`), and
/// with `heads`/`permute_ffn` per-head value rotations and FFN permutations, fitted in at most
/// `iterations` alternating rounds; applied to B, checked against B on `check_tokens` tokens
/// of `data` in windows of `context` (within `tolerance`), and written to every path of
/// `outs`. With `true_rotation`/`seed` the fitted map is compared with that rotation's
/// inverse. Returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (model, model_b, outs, residual="rotation", heads=false, permute_ffn=false, iterations=None,
    gguf_type="f32", data=None, check_tokens=None, context=None, tolerance=None,
    true_rotation=None, seed=0))]
#[allow(clippy::too_many_arguments)]
fn align_weights_model(
    py: Python<'_>,
    model: PathBuf,
    model_b: PathBuf,
    outs: Vec<PathBuf>,
    residual: &str,
    heads: bool,
    permute_ffn: bool,
    iterations: Option<usize>,
    gguf_type: &str,
    data: Option<PathBuf>,
    check_tokens: Option<usize>,
    context: Option<usize>,
    tolerance: Option<f64>,
    true_rotation: Option<&str>,
    seed: u64,
) -> PyResult<String> {
    let d = WeightAlignOptions::default();
    let job = WeightAlignJob {
        model,
        model_b,
        out: outs,
        data,
        options: WeightAlignOptions {
            residual: residual.parse().or_py()?,
            heads,
            permute_ffn,
            iterations: iterations.unwrap_or(d.iterations),
            gguf_type: gguf_type_named(gguf_type).or_py()?,
            check_tokens: check_tokens.unwrap_or(d.check_tokens),
            context: context.or(d.context),
            tolerance: tolerance.unwrap_or(d.tolerance),
            true_rotation: true_rotation
                .map(|s| {
                    s.parse::<RotationKind>().map_err(|_| {
                        crate::error::value(format!(
                            "true_rotation={s:?}: use {}",
                            RotationKind::NAMES.join(" or ")
                        ))
                    })
                })
                .transpose()?,
            seed,
        },
    };
    let report = compute(py, || {
        orthoformer::rotate::weight_align::run(&job, &mut |_, _, _| {}).or_py()
    })?;
    serde_json::to_string(&report).map_err(|e| crate::error::value(e.to_string()))
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rotate_model, m)?)?;
    m.add_function(wrap_pyfunction!(align_weights_model, m)?)?;
    Ok(())
}
