//! Library errors as Python exceptions. A missing file is `FileNotFoundError`, a refused one
//! `PermissionError`, any other I/O failure `OSError`; everything else the library rejects
//! (bad arguments, configs, files, checkpoints) is `ValueError`. The message is the whole cause
//! chain on one line, as the command line prints it. [`guard`] turns a panic, which would be a
//! bug, into a `RuntimeError` instead of letting it cross into Python.

use std::io::ErrorKind;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::PyErr;
use pyo3::exceptions::{
    PyFileNotFoundError, PyOSError, PyPermissionError, PyRuntimeError, PyValueError,
};

/// `error: cause: cause ...` on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// The Python keyword argument that sets the library option `field` (a nested field,
/// `adamw.beta1`, by its last part): the library names fields, Python says its keywords.
pub(crate) fn keyword(field: &str) -> String {
    field.rsplit('.').next().unwrap_or(field).to_string()
}

/// The Python exception for a library error.
pub(crate) fn lib(e: orthoformer::Error) -> PyErr {
    let msg = orthoformer::error::name_fields(&chain(&e), keyword);
    match &e {
        orthoformer::Error::Io { source, .. } => match source.kind() {
            ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
            _ => PyOSError::new_err(msg),
        },
        _ => PyValueError::new_err(msg),
    }
}

/// A `ValueError` with `msg`.
pub(crate) fn value(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

/// Converts a library result into a Python one.
pub(crate) trait OrPy<T> {
    /// The value, or the error as a Python exception (see [`lib`]).
    fn or_py(self) -> pyo3::PyResult<T>;
}

impl<T, E: Into<orthoformer::Error>> OrPy<T> for Result<T, E> {
    fn or_py(self) -> pyo3::PyResult<T> {
        self.map_err(|e| lib(e.into()))
    }
}

/// Runs `f` with the GIL released on a worker of the engine's thread pool, a panic turned
/// into a `RuntimeError` ([`guard`]). On a worker each parallel loop of the call runs where it
/// is called, instead of being handed over from the Python thread and waited for (a tenth of
/// a small model's training step on one thread; `orthoformer::nn::threads::run_in_pool`).
/// `f` must not call back into Python.
pub(crate) fn compute<T: Send>(
    py: pyo3::Python<'_>,
    f: impl FnOnce() -> pyo3::PyResult<T> + Send,
) -> pyo3::PyResult<T> {
    py.detach(|| orthoformer::nn::threads::run_in_pool(None, || guard(f)))
}

/// Runs `f`, turning a panic into a `RuntimeError` that says it is a bug.
pub(crate) fn guard<T>(f: impl FnOnce() -> pyo3::PyResult<T>) -> pyo3::PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(PyRuntimeError::new_err(format!(
                "internal error in orthoformer (a bug: please report it with the call that \
                 caused it): {what}"
            )))
        }
    }
}
