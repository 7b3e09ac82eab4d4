//! The library's one input/output check for the Python package's writers
//! (`orthoformer::io::file_set::check_outputs`, `claim_outputs`): an output never is, holds or
//! sits inside an input or another output (paths resolved, compared by device and inode), and
//! a claimed output is locked against a second process until released. Roles are field
//! names (`out`, `model`), written into the message as Python keywords.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::error::{OrPy, value};
use orthoformer::io::file_set::{self, Claim, Input, OutKind, Output};

/// `(role, path)` inputs and `(role, path, "file" | "folder")` outputs as the library's.
fn parse<'a>(
    inputs: &'a [(String, PathBuf)],
    outputs: &'a [(String, PathBuf, String)],
) -> PyResult<(Vec<Input<'a>>, Vec<Output<'a>>)> {
    let ins = inputs.iter().map(|(r, p)| Input::new(r, p)).collect();
    let outs = outputs
        .iter()
        .map(|(role, path, kind)| {
            let kind = match kind.as_str() {
                "file" => OutKind::File,
                "folder" => OutKind::Folder,
                other => return Err(value(format!("output kind {other:?}: use file or folder"))),
            };
            Ok(Output { role, path, kind })
        })
        .collect::<PyResult<_>>()?;
    Ok((ins, outs))
}

/// Refuses (`ValueError`, one line) any output that is, holds or sits inside an input or
/// another output, or cannot be written as its kind. Reads metadata only.
#[pyfunction]
fn check_outputs(
    inputs: Vec<(String, PathBuf)>,
    outputs: Vec<(String, PathBuf, String)>,
) -> PyResult<()> {
    let (ins, outs) = parse(&inputs, &outputs)?;
    file_set::check_outputs(&ins, &outs).or_py()
}

/// Outputs claimed by [`claim_outputs`]: locked until `release()` (or the end of a `with`
/// block, or the process).
#[pyclass(name = "OutputClaim", module = "orthoformer._native")]
struct PyClaim {
    inner: Option<Claim>,
}

#[pymethods]
impl PyClaim {
    /// Releases the locks (their files are removed); a second call does nothing.
    fn release(&mut self) {
        self.inner = None;
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&mut self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.inner = None;
        false
    }
}

/// [`check_outputs`], then each output locked, or refused at once (`ValueError` naming the
/// process that holds it).
#[pyfunction]
fn claim_outputs(
    inputs: Vec<(String, PathBuf)>,
    outputs: Vec<(String, PathBuf, String)>,
) -> PyResult<PyClaim> {
    let (ins, outs) = parse(&inputs, &outputs)?;
    let claim = file_set::claim_outputs(&ins, &outs).or_py()?;
    Ok(PyClaim { inner: Some(claim) })
}

/// Registers the check, the claim and its class.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_outputs, m)?)?;
    m.add_function(wrap_pyfunction!(claim_outputs, m)?)?;
    m.add_class::<PyClaim>()?;
    Ok(())
}
