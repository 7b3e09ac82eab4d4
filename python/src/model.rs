//! The GPT (`orthoformer::model`): configurations and presets, the tensor table, the frozen
//! `W_Q, W_K` regenerated from their seeds (with the Hadamard projection's signs, permutation
//! and Kronecker factors, so PyTorch can run the same fast transform), and the Rust model
//! itself as `Gpt`: initialisation, logits, loss, gradients, model files.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use orthoformer::model::gpt::file::{load_model, save_model};
use orthoformer::model::{AttentionKind, FrozenStore, Gpt, GptConfig, Position, Temperature};
use orthoformer::nn::hadamard::{Factor, dense_factor, factors};
use orthoformer::train::session::{ModelRequest, check_same_config};

use crate::convert::{batch_len, checked_numel, f32_in, f32_out, f64_out, u32_in};
use crate::error::{OrPy, compute, guard, value};

/// Parses a `GptConfig` from JSON (every field required, unknown fields rejected) and
/// validates it.
pub(crate) fn parse_config(json: &str) -> PyResult<GptConfig> {
    let cfg: GptConfig =
        serde_json::from_str(json).map_err(|e| value(format!("bad model config: {e}")))?;
    cfg.validate().or_py()?;
    Ok(cfg)
}

fn to_json(cfg: &GptConfig) -> PyResult<String> {
    serde_json::to_string(cfg).map_err(|e| value(format!("serialising the config: {e}")))
}

/// The model `orthoformer train` would build from `--recipe`, `--preset`/`--config`,
/// `--attention`, `--context`, `--width`, `--position` and `--temperature` (none of them: the
/// training default), as validated JSON.
#[pyfunction]
#[pyo3(signature = (preset=None, config=None, attention=None, context=None, width=None, position=None, temperature=None, recipe=None))]
#[allow(clippy::too_many_arguments)] // one per command-line flag, all optional
fn config_resolve(
    preset: Option<&str>,
    config: Option<PathBuf>,
    attention: Option<&str>,
    context: Option<usize>,
    width: Option<usize>,
    position: Option<&str>,
    temperature: Option<&str>,
    recipe: Option<&str>,
) -> PyResult<String> {
    let choice = orthoformer::train::model_choice::ModelChoice {
        preset: preset.map(str::to_string),
        config,
        context,
        width,
        attention: attention
            .map(|a| AttentionKind::parse(a.trim()))
            .transpose()
            .or_py()?,
        position: position.map(Position::parse).transpose().or_py()?,
        temperature: temperature.map(Temperature::parse).transpose().or_py()?,
        ..Default::default()
    };
    let base = match recipe {
        Some(name) => Some(orthoformer::train::recipe::recipe(name).or_py()?.0),
        None => None,
    };
    let cfg = choice.resolve(base).or_py()?;
    cfg.validate().or_py()?;
    choice.check_applies(&cfg).or_py()?;
    to_json(&cfg)
}

/// Checks a resumed run against what was asked for, as `orthoformer train --resume` does:
/// the checkpoint `out`'s configuration `saved_json` must equal a whole requested one
/// (`requested_json`, which already holds the single flags) or, without one, every single
/// field given.
#[pyfunction]
#[pyo3(signature = (out, saved_json, requested_json=None, attention=None, context=None, width=None, position=None, temperature=None))]
#[allow(clippy::too_many_arguments)] // one per command-line flag, all optional
fn resume_check(
    out: PathBuf,
    saved_json: &str,
    requested_json: Option<&str>,
    attention: Option<&str>,
    context: Option<usize>,
    width: Option<usize>,
    position: Option<&str>,
    temperature: Option<&str>,
) -> PyResult<()> {
    let saved = parse_config(saved_json)?;
    if let Some(want) = requested_json {
        return check_same_config(&out, &saved, &parse_config(want)?).or_py();
    }
    let request = ModelRequest {
        attention: attention.map(AttentionKind::parse).transpose().or_py()?,
        context,
        d_model: width,
        position: position.map(Position::parse).transpose().or_py()?,
        temperature: temperature.map(Temperature::parse).transpose().or_py()?,
        ..Default::default()
    };
    request.check(&out, &saved).or_py()
}

/// A config checked and written back in the library's canonical JSON form.
#[pyfunction]
fn config_check(config_json: &str) -> PyResult<String> {
    to_json(&parse_config(config_json)?)
}

/// The preset names and the attention variants.
#[pyfunction]
fn model_names() -> (Vec<&'static str>, Vec<&'static str>) {
    (
        GptConfig::PRESETS.to_vec(),
        AttentionKind::ALL.map(AttentionKind::name).to_vec(),
    )
}

/// How each variant makes Q and K: `(q, k)` among `trainable`, `frozen-dense`, `tied-to-q`,
/// `identity`, `hadamard`, `trained-from-draw`.
#[pyfunction]
fn attention_projections(attention: &str) -> PyResult<(&'static str, &'static str)> {
    use orthoformer::model::Projection as P;
    let name = |p: P| match p {
        P::Trainable => "trainable",
        P::FrozenDense => "frozen-dense",
        P::TiedToQ => "tied-to-q",
        P::Identity => "identity",
        P::Hadamard => "hadamard",
        P::TrainedFromDraw => "trained-from-draw",
    };
    let a = AttentionKind::parse(attention).or_py()?;
    Ok((name(a.q_projection()), name(a.k_projection())))
}

/// One row of the tensor table: name, shape, offset in the flat buffer, weight decay.
type TensorRow = (String, Vec<usize>, usize, bool);

/// A frozen tensor: name, shape, values (f32 bytes) and, for a Hadamard projection, its signs
/// (f32 bytes) and output permutation.
type FrozenRow<'py> = (
    String,
    Vec<usize>,
    Bound<'py, PyByteArray>,
    Option<(Bound<'py, PyByteArray>, Vec<usize>)>,
);

/// The trainable tensor table of a model, in buffer order.
pub(crate) fn tensor_table(model: &Gpt) -> Vec<TensorRow> {
    model
        .params()
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.shape.clone(), t.offset, t.decay))
        .collect()
}

/// The frozen tensors of a store as Python values.
pub(crate) fn frozen_rows<'py>(
    py: Python<'py>,
    frozen: &FrozenStore,
) -> PyResult<Vec<FrozenRow<'py>>> {
    frozen
        .tensors
        .iter()
        .map(|t| {
            let fast = match &t.fast {
                Some(s) => Some((f32_out(py, s.signs())?, s.perm().to_vec())),
                None => None,
            };
            Ok((t.name.clone(), t.shape.clone(), f32_out(py, &t.data)?, fast))
        })
        .collect()
}

/// The frozen `W_Q, W_K` a config implies, regenerated from its `frozen_method` and
/// `frozen_seed` by the library's generators (empty when every projection trains).
#[pyfunction]
fn frozen_weights<'py>(py: Python<'py>, config_json: &str) -> PyResult<Vec<FrozenRow<'py>>> {
    let cfg = parse_config(config_json)?;
    let store = py.detach(|| guard(|| FrozenStore::for_config(&cfg).or_py()))?;
    frozen_rows(py, &store)
}

/// The Kronecker factors of the Hadamard matrix of order `c`, first factor outermost: `(m,
/// None)` for a Sylvester `H_m` (applied by butterflies), `(m, values)` for a dense `m x m`
/// factor (f64 bytes, row-major).
#[pyfunction]
fn hadamard_factors<'py>(
    py: Python<'py>,
    c: usize,
) -> PyResult<Vec<(usize, Option<Bound<'py, PyByteArray>>)>> {
    let fs =
        factors(c).ok_or_else(|| value(format!("no Hadamard matrix of order {c} is known")))?;
    fs.iter()
        .map(|f| match f {
            Factor::Sylvester(m) => Ok((*m, None)),
            Factor::Dense(m, _) => Ok((*m, Some(f64_out(py, &dense_factor(f))?))),
        })
        .collect()
}

/// Checks that a `b x t` batch's activations (what `Gpt` allocates for it) can be allocated,
/// so an absurd batch is a `MemoryError`, not an abort inside the library.
fn check_activations(model: &Gpt, b: usize, t: usize) -> PyResult<()> {
    if t > model.config().context {
        // The library's own check gives the message; nothing is allocated.
        return Ok(());
    }
    match orthoformer::model::accounting::activation_floats(model.config(), b, t) {
        Some(floats) => checked_numel(&[floats], 4).map(|_| ()),
        None => Err(value(format!(
            "a {b} x {t} batch has more activations than memory can address"
        ))),
    }
}

/// The Rust GPT: its parameters, frozen weights, forward and backward.
#[pyclass(name = "Gpt", module = "orthoformer._native")]
pub(crate) struct PyGpt {
    pub(crate) inner: Gpt,
}

#[pymethods]
impl PyGpt {
    /// `Gpt::new(config, seed)`: GPT-2 initialisation drawn from `seed`, frozen weights from
    /// the config's generator; exactly the model `orthoformer train --model-seed SEED` starts
    /// from.
    #[new]
    #[pyo3(signature = (config_json, seed=0))]
    fn new(py: Python<'_>, config_json: &str, seed: u64) -> PyResult<Self> {
        let cfg = parse_config(config_json)?;
        let inner = py.detach(|| guard(|| Gpt::new(cfg, seed).or_py()))?;
        Ok(PyGpt { inner })
    }

    /// A model with every trainable value zero and the frozen weights generated.
    #[staticmethod]
    fn zeroed(py: Python<'_>, config_json: &str) -> PyResult<Self> {
        let cfg = parse_config(config_json)?;
        let inner = py.detach(|| guard(|| Gpt::zeroed(cfg).or_py()))?;
        Ok(PyGpt { inner })
    }

    /// Reads a model file (`model.safetensors` of a checkpoint), frozen weights checked
    /// against their hash.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py.detach(|| guard(|| load_model(&path).or_py()))?;
        Ok(PyGpt { inner })
    }

    /// Writes the model file atomically (every weight, frozen ones included, with the frozen
    /// weights' generator and hash in the metadata).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let inner = &self.inner;
        py.detach(|| guard(|| save_model(&path, inner).or_py()))
    }

    /// The configuration as JSON.
    fn config_json(&self) -> PyResult<String> {
        to_json(self.inner.config())
    }

    /// The trainable tensors: `(name, shape, offset, decay)` in buffer order.
    fn tensors(&self) -> Vec<TensorRow> {
        tensor_table(&self.inner)
    }

    /// Every trainable parameter, flat (f32 bytes, buffer order).
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyByteArray>> {
        f32_out(py, &self.inner.params().data)
    }

    /// Replaces every trainable parameter (f32 bytes, buffer order).
    fn set_params(&mut self, data: &[u8]) -> PyResult<()> {
        let n = self.inner.params().data.len();
        let v = f32_in(data, "parameters", Some(n))?;
        self.inner.params_mut().data.copy_from_slice(&v);
        Ok(())
    }

    /// The gradient buffer, flat (f32 bytes, buffer order).
    fn grads<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyByteArray>> {
        f32_out(py, &self.inner.params().grad)
    }

    /// Sets every gradient to zero.
    fn zero_grad(&mut self) {
        self.inner.zero_grad();
    }

    /// The frozen tensors (see `frozen_weights`).
    fn frozen<'py>(&self, py: Python<'py>) -> PyResult<Vec<FrozenRow<'py>>> {
        frozen_rows(py, self.inner.frozen())
    }

    /// The frozen weights' generator as JSON (`None` when they were imported or absent).
    fn frozen_generator(&self) -> PyResult<Option<String>> {
        self.inner
            .frozen()
            .generator
            .as_ref()
            .map(|g| serde_json::to_string(g).map_err(|e| value(e.to_string())))
            .transpose()
    }

    /// SHA-256 of the frozen values (what checkpoints record).
    fn frozen_hash(&self) -> String {
        self.inner.frozen().hash()
    }

    /// Replaces a frozen tensor with values made elsewhere (f32 bytes); the generator is
    /// dropped, so checkpoints then store them in full.
    fn import_frozen(&mut self, name: &str, data: &[u8]) -> PyResult<()> {
        let v = f32_in(data, name, None)?;
        self.inner.import_frozen(name, &v).or_py()
    }

    /// Logits `(B, T, V)` (f32 bytes) of `tokens` (`B x T` u32 bytes), without dropout.
    fn logits<'py>(
        &mut self,
        py: Python<'py>,
        tokens: &[u8],
        b: usize,
        t: usize,
    ) -> PyResult<Bound<'py, PyByteArray>> {
        let ids = u32_in(tokens, "tokens", Some(batch_len(b, t)?))?;
        check_activations(&self.inner, b, t)?;
        let inner = &mut self.inner;
        let logits = compute(py, || inner.logits(&ids, b, t).map(<[f32]>::to_vec).or_py())?;
        f32_out(py, &logits)
    }

    /// Mean cross-entropy of a batch, without dropout or backward.
    fn loss(
        &mut self,
        py: Python<'_>,
        inputs: &[u8],
        targets: &[u8],
        b: usize,
        t: usize,
    ) -> PyResult<f32> {
        let n = batch_len(b, t)?;
        let (x, y) = (
            u32_in(inputs, "inputs", Some(n))?,
            u32_in(targets, "targets", Some(n))?,
        );
        check_activations(&self.inner, b, t)?;
        let inner = &mut self.inner;
        compute(py, || inner.loss(&x, &y, b, t).or_py())
    }

    /// Forward + backward of the mean cross-entropy; gradients are added to the buffer.
    #[allow(clippy::too_many_arguments)]
    fn forward_backward(
        &mut self,
        py: Python<'_>,
        inputs: &[u8],
        targets: &[u8],
        b: usize,
        t: usize,
        dropout_seed: u64,
    ) -> PyResult<f32> {
        let n = batch_len(b, t)?;
        let (x, y) = (
            u32_in(inputs, "inputs", Some(n))?,
            u32_in(targets, "targets", Some(n))?,
        );
        check_activations(&self.inner, b, t)?;
        let inner = &mut self.inner;
        compute(py, || {
            inner.forward_backward(&x, &y, b, t, dropout_seed).or_py()
        })
    }
}

/// Adds this file's functions and classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(config_resolve, m)?)?;
    m.add_function(wrap_pyfunction!(config_check, m)?)?;
    m.add_function(wrap_pyfunction!(resume_check, m)?)?;
    m.add_function(wrap_pyfunction!(model_names, m)?)?;
    m.add_function(wrap_pyfunction!(attention_projections, m)?)?;
    m.add_function(wrap_pyfunction!(frozen_weights, m)?)?;
    m.add_function(wrap_pyfunction!(hadamard_factors, m)?)?;
    m.add_class::<PyGpt>()?;
    Ok(())
}
