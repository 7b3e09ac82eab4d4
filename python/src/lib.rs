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

mod accounting;
mod checkpoint;
mod construct;
mod convert;
mod error;
mod generate;
mod init;
mod ladder;
mod model;
mod rotate;
mod tokens;
mod train;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
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
    Ok(())
}
