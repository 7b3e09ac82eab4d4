//! Building a model piece by piece where it will run: the GPT-2 initial values one tensor at
//! a time (`InitDraws`, so the PyTorch GPT on a device never holds a second copy of the model
//! on the host), and the seeds and Hadamard transforms of single frozen projections (so one
//! attention module regenerates its own frozen matrices from `(seed, method, tensor)`).

use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use orthoformer::model::InitDraws;
use orthoformer::model::gpt::store::head_seed;
use orthoformer::nn::srht::Srht;

use crate::convert::f32_out;
use crate::error::{lib, value};
use crate::model::parse_config;

/// The initial values of a config's trainable tensors from a seed, tensor by tensor in the
/// library's draw order and each in pieces of any size (`Gpt::new`'s values, to the bit).
#[pyclass(name = "InitDraws", module = "orthoformer._native")]
pub(crate) struct PyInitDraws {
    inner: InitDraws,
}

#[pymethods]
impl PyInitDraws {
    /// The draws of `config_json` (validated) from `seed`.
    #[new]
    fn new(config_json: &str, seed: u64) -> PyResult<Self> {
        let cfg = parse_config(config_json)?;
        Ok(PyInitDraws {
            inner: InitDraws::new(&cfg, seed),
        })
    }

    /// Starts the next tensor: `(name, shape)`, or `None` after the last.
    fn next_tensor(&mut self, py: Python<'_>) -> PyResult<Option<(String, Vec<usize>)>> {
        let spec = py.detach(|| self.inner.next_tensor()).map_err(lib)?;
        Ok(spec.map(|spec| (spec.name, spec.shape)))
    }

    /// The current tensor's next `n` values (fewer at its end) as f32 bytes.
    fn draw<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyByteArray>> {
        let values = py.detach(|| self.inner.draw(n));
        f32_out(py, &values)
    }
}

/// The seed of head `head` of frozen tensor `tensor` (Q of layer `l` is `2l`, K is `2l+1`)
/// under base seed `seed`, as the library's `FrozenStore` draws it.
#[pyfunction]
fn frozen_head_seed(seed: u64, tensor: usize, head: usize) -> u64 {
    head_seed(seed, tensor, head)
}

/// The subsampled randomised Hadamard transform of width `c` drawn from `seed`: its random
/// signs (f32 bytes) and output permutation.
#[pyfunction]
fn srht<'py>(
    py: Python<'py>,
    c: usize,
    seed: u64,
) -> PyResult<(Bound<'py, PyByteArray>, Vec<usize>)> {
    let s = Srht::new(c, seed)
        .ok_or_else(|| value(format!("no Hadamard matrix of order {c} is known")))?;
    Ok((f32_out(py, s.signs())?, s.perm().to_vec()))
}

/// Adds this file's functions and classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyInitDraws>()?;
    m.add_function(wrap_pyfunction!(frozen_head_seed, m)?)?;
    m.add_function(wrap_pyfunction!(srht, m)?)?;
    Ok(())
}
