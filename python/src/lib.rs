//! `orthoformer._native`: the Rust library exposed to Python (PyO3, stable ABI `abi3-py39`).
//!
//! This module is thin glue: every function calls the library (`orthoformer`) and converts
//! values at the boundary. The Python package (`python/orthoformer/`) wraps it in small
//! documented functions (NumPy arrays, PyTorch modules). Conventions:
//! - Arrays cross the boundary as little-endian bytes (`bytes` in, `bytearray` out, which
//!   `numpy.frombuffer` views without a copy); the Python side gives them shape and dtype.
//! - Structured values (configs, reports, checkpoint state) cross as JSON text, in the
//!   library's own serde form, so they follow the library's format as it changes.
//! - Library errors become Python exceptions (`error.rs`); a panic never crosses the boundary.
//! - The engine's thread pool obeys the command line's cap on `RAYON_NUM_THREADS`
//!   ([`orthoformer::nn::threads::check_thread_env`]): a larger value is warned about and the
//!   pool is built at the cap when the module loads, before anything could start it bigger.

mod accounting;
mod checkpoint;
mod construct;
mod convert;
mod error;
mod generate;
mod init;
mod interrupt;
mod ladder;
mod model;
mod outputs;
mod rotate;
mod tokens;
mod train;

use pyo3::exceptions::PyRuntimeWarning;
use pyo3::prelude::*;

use orthoformer::nn::threads;

/// Workers in the engine's thread pool (the pool starts here if it has not yet).
#[pyfunction]
fn pool_threads() -> usize {
    threads::current_threads()
}

/// Caps the pool as the command line does: `RAYON_NUM_THREADS` above
/// [`threads::MAX_WORKERS_PER_CORE`] per core gets a `RuntimeWarning` (importing a package
/// should not fail on an environment variable) and a pool of the cap, built now.
fn cap_pool(py: Python<'_>) -> PyResult<()> {
    if let Err(e) = threads::check_thread_env(threads::cores()) {
        let msg = format!("{e}; using {} workers", e.most);
        let msg = std::ffi::CString::new(msg).unwrap_or_default();
        PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &msg, 1)?;
        threads::set_global_threads(e.most);
    }
    Ok(())
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    cap_pool(m.py())?;
    m.add_function(wrap_pyfunction!(pool_threads, m)?)?;
    init::register(m)?;
    accounting::register(m)?;
    rotate::register(m)?;
    generate::register(m)?;
    model::register(m)?;
    construct::register(m)?;
    checkpoint::register(m)?;
    train::register(m)?;
    tokens::register(m)?;
    ladder::register(m)?;
    outputs::register(m)?;
    Ok(())
}
