//! The size ladder (`orthoformer::experiments::ladder`) for the PyTorch engine
//! (`python -m orthoformer.ladder`): the plan, the pending runs (with the learning rates added
//! as they become due), each run's folder and the report are the library's, so the two
//! engines cannot disagree on them. Values cross as JSON text; a bad plan or folder raises
//! `ValueError` with the library's one-line message.

use std::path::Path;

use pyo3::prelude::*;

use orthoformer::experiments::ladder;

use crate::error::{OrPy, compute, value};

/// Checks the plan `plan_json` (a JSON object, the fields of docs/LADDER.md), makes its paths
/// absolute, hashes its data and starts the ladder in `out` (`ladder.json`, `transfer.bin`),
/// or checks that `out` holds this very ladder. Returns the normalised plan as JSON (with the
/// rates added so far).
#[pyfunction]
fn ladder_start(py: Python<'_>, plan_json: &str, out: &str) -> PyResult<String> {
    compute(py, || {
        let plan = ladder::start(plan_json, Path::new(out)).or_py()?;
        plan.to_json().or_py()
    })
}

/// The unfinished runs of the ladder in `out`, as a JSON list of run specs (every field an
/// engine needs; `docs/LADDER.md`), after adding every learning rate that is due; `[]` when
/// the ladder is done.
#[pyfunction]
fn ladder_pending(py: Python<'_>, out: &str) -> PyResult<String> {
    compute(py, || {
        let runs = ladder::pending(Path::new(out)).or_py()?;
        serde_json::to_string(&runs).map_err(|e| value(e.to_string()))
    })
}

/// Writes the report of the finished ladder in `out` (`report.json`, `report.md`, the plots)
/// and returns `report.json`'s text; with `partial`, of the rungs whose runs are all
/// finished (the others named in its `unfinished`).
#[pyfunction]
#[pyo3(signature = (out, partial = false))]
fn ladder_report(py: Python<'_>, out: &str, partial: bool) -> PyResult<String> {
    compute(py, || {
        let report = ladder::publish::write(Path::new(out), partial).or_py()?;
        serde_json::to_string_pretty(&report).map_err(|e| value(e.to_string()))
    })
}

/// The folder of one run of the ladder in `out`: `OUT/<rung>/seed-<s>/lr-<lr>/<variant>`.
#[pyfunction]
fn ladder_run_dir(out: &str, rung: &str, seed: u64, lr: f64, variant: &str) -> PyResult<String> {
    crate::error::guard(|| {
        let dir = ladder::run_dir(Path::new(out), rung, seed, lr, variant).or_py()?;
        Ok(dir.display().to_string())
    })
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ladder_start, m)?)?;
    m.add_function(wrap_pyfunction!(ladder_pending, m)?)?;
    m.add_function(wrap_pyfunction!(ladder_report, m)?)?;
    m.add_function(wrap_pyfunction!(ladder_run_dir, m)?)?;
    Ok(())
}
