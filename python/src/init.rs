//! Initialisers (`orthoformer::init`): every method of `orthoformer init` by name (the four
//! orthogonal generators, the `torch.nn.init` toolkit, ZerO), mimetic attention
//! initialisation, `calculate_gain`, fans and the orthogonality error. Values are computed in
//! f64 by the library and returned as f64 bytes; the Python side rounds them to the dtype
//! asked for, once, as the command line does.

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};

use orthoformer::init::fan::fans as lib_fans;
use orthoformer::init::gain::{NONLINEARITIES, calculate_gain as lib_gain};
use orthoformer::init::method::{InitMethod, InitParams, generate as lib_generate};
use orthoformer::init::mimetic::{MimeticParams, mimetic as lib_mimetic};
use orthoformer::init::orthogonal::ortho_error as lib_ortho_error;

use crate::convert::{checked_numel, f64_in, f64_out};
use crate::error::{OrPy, guard, value};

/// Reads the optional parameters of [`InitParams`] from a dict; an unknown key is an error
/// (a typo must not silently fall back to a default).
fn params(p: Option<&Bound<'_, PyDict>>) -> PyResult<InitParams> {
    let mut out = InitParams::default();
    let Some(p) = p else { return Ok(out) };
    for (k, v) in p.iter() {
        let key: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        let num = || -> PyResult<f64> { v.extract::<f64>() };
        match key.as_str() {
            "gain" => out.gain = Some(num()?),
            "a" => out.a = Some(num()?),
            "mean" => out.mean = Some(num()?),
            "std" => out.std = Some(num()?),
            "lo" => out.lo = Some(num()?),
            "hi" => out.hi = Some(num()?),
            "val" => out.val = Some(num()?),
            "sparsity" => out.sparsity = Some(num()?),
            "groups" => out.groups = Some(v.extract::<usize>()?),
            "nonlinearity" => out.nonlinearity = Some(v.extract::<String>()?),
            "mode" => out.mode = Some(v.extract::<String>()?),
            other => {
                return Err(value(format!(
                    "unknown initialiser parameter {other:?}: use gain, a, mean, std, lo, hi, \
                     val, sparsity, groups, nonlinearity or mode"
                )));
            }
        }
    }
    Ok(out)
}

/// `orthoformer init --method METHOD --shape SHAPE --seed SEED` with `params`: the row-major
/// values of `shape` as little-endian f64 bytes. Orthogonal generators view the shape as
/// `shape[0] x (numel / shape[0])`.
#[pyfunction]
#[pyo3(signature = (method, shape, seed=0, params=None))]
fn init_generate<'py>(
    py: Python<'py>,
    method: &str,
    shape: Vec<usize>,
    seed: u64,
    params: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyByteArray>> {
    let m = InitMethod::from_name(method).or_py()?;
    let p = self::params(params)?;
    if !shape.contains(&0) {
        checked_numel(&shape, 8)?;
    }
    let values = py.detach(|| guard(|| lib_generate(m, &shape, &p, seed).or_py()))?;
    f64_out(py, &values)
}

/// One frozen head's `rows x cols` block as the library draws it (`FrozenDraw::block`):
/// `method` an orthogonal method (`qr`, `svd`, `householder`, `cayley`) or `gaussian`
/// (i.i.d. `N(0, 1/rows)`, not orthogonal); row-major little-endian f64 bytes.
#[pyfunction]
fn init_frozen_block<'py>(
    py: Python<'py>,
    method: &str,
    rows: usize,
    cols: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyByteArray>> {
    let draw = orthoformer::model::FrozenDraw::parse(method).map_err(value)?;
    checked_numel(&[rows, cols], 8)?;
    let values = py.detach(|| guard(|| draw.block(rows, cols, seed).or_py()))?;
    f64_out(py, &values)
}

/// Every method name with its one-line description, in `orthoformer init --list` order.
#[pyfunction]
fn init_methods() -> Vec<(&'static str, String)> {
    // Descriptions name option fields; Python says its keywords.
    InitMethod::ALL
        .into_iter()
        .map(|m| {
            let d = orthoformer::error::name_fields(m.description(), crate::error::keyword);
            (m.name(), d)
        })
        .collect()
}

/// Whether `method` produces orthonormal rows or columns, and whether it is Haar-distributed.
#[pyfunction]
fn init_method_kind(method: &str) -> PyResult<(bool, bool)> {
    let m = InitMethod::from_name(method).or_py()?;
    let haar = match m {
        InitMethod::Ortho(o) => o.is_haar(),
        InitMethod::Orthogonal => true,
        _ => false,
    };
    Ok((m.is_orthogonal(), haar))
}

/// Mimetic attention weights for width `d` and `heads` heads: `(wq, wk, wv, wo)` as `d x d`
/// f64 bytes, and the relative errors of `W_Q W_Kᵀ` and `W_V W_O` against their targets.
/// `alphas_betas` is `(α₁, β₁, α₂, β₂)`, default the paper's.
#[pyfunction]
#[pyo3(signature = (d, heads, seed=0, alphas_betas=None))]
#[allow(clippy::type_complexity)]
fn init_mimetic<'py>(
    py: Python<'py>,
    d: usize,
    heads: usize,
    seed: u64,
    alphas_betas: Option<(f64, f64, f64, f64)>,
) -> PyResult<(Vec<Bound<'py, PyByteArray>>, f64, f64)> {
    let p = match alphas_betas {
        Some((alpha1, beta1, alpha2, beta2)) => MimeticParams {
            alpha1,
            beta1,
            alpha2,
            beta2,
        },
        None => MimeticParams::default(),
    };
    checked_numel(&[4, d, d], 8)?;
    let m = py.detach(|| guard(|| lib_mimetic(d, heads, p, seed).or_py()))?;
    let arrays = [&m.wq, &m.wk, &m.wv, &m.wo]
        .into_iter()
        .map(|w| f64_out(py, w))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((arrays, m.qk_rel_error, m.vo_rel_error))
}

/// The default mimetic constants `(α₁, β₁, α₂, β₂)`.
#[pyfunction]
fn init_mimetic_defaults() -> (f64, f64, f64, f64) {
    let p = MimeticParams::default();
    (p.alpha1, p.beta1, p.alpha2, p.beta2)
}

/// `torch.nn.init.calculate_gain(nonlinearity, param)`.
#[pyfunction]
#[pyo3(signature = (nonlinearity, param=None))]
fn init_calculate_gain(nonlinearity: &str, param: Option<f64>) -> PyResult<f64> {
    lib_gain(nonlinearity, param).or_py()
}

/// Every nonlinearity `calculate_gain` accepts.
#[pyfunction]
fn init_nonlinearities() -> Vec<&'static str> {
    NONLINEARITIES.to_vec()
}

/// `(fan_in, fan_out)` of a weight shape, PyTorch's rule.
#[pyfunction]
fn init_fans(shape: Vec<usize>) -> PyResult<(usize, usize)> {
    lib_fans(&shape).or_py()
}

/// `‖WᵀW − gain² I‖_F` (tall) or `‖WWᵀ − gain² I‖_F` (wide) of a row-major `rows x cols`
/// matrix given as f64 bytes.
#[pyfunction]
#[pyo3(signature = (values, rows, cols, gain=1.0))]
fn init_ortho_error(
    py: Python<'_>,
    values: &[u8],
    rows: usize,
    cols: usize,
    gain: f64,
) -> PyResult<f64> {
    let n = checked_numel(&[rows, cols], 8)?;
    let w = f64_in(values, "matrix", Some(n))?;
    if n == 0 {
        return Err(value(format!("a {rows} x {cols} matrix has no entries")));
    }
    py.detach(|| guard(|| Ok(lib_ortho_error(&w, rows, cols, gain))))
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(init_generate, m)?)?;
    m.add_function(wrap_pyfunction!(init_frozen_block, m)?)?;
    m.add_function(wrap_pyfunction!(init_methods, m)?)?;
    m.add_function(wrap_pyfunction!(init_method_kind, m)?)?;
    m.add_function(wrap_pyfunction!(init_mimetic, m)?)?;
    m.add_function(wrap_pyfunction!(init_mimetic_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(init_calculate_gain, m)?)?;
    m.add_function(wrap_pyfunction!(init_nonlinearities, m)?)?;
    m.add_function(wrap_pyfunction!(init_fans, m)?)?;
    m.add_function(wrap_pyfunction!(init_ortho_error, m)?)?;
    Ok(())
}
