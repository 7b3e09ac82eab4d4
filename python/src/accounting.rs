//! Accounting (`orthoformer::model::accounting`): the exact parameter, memory and FLOP report
//! of a configuration that `orthoformer params` prints, as JSON.

use pyo3::prelude::*;

use orthoformer::analysis::params_report::ParamsReport;

use crate::error::{OrPy, value};
use crate::model::parse_config;

/// The account of `config_json` (a `GptConfig`) with activations for a `batch x seq` batch
/// (`seq` defaults to the context), as JSON: `orthoformer params --json`'s report (`config`, `account`, `frozen_savings`,
/// `seed_claims`).
#[pyfunction]
#[pyo3(signature = (config_json, batch=8, seq=None, with_seed_claims=false))]
fn params_report(
    config_json: &str,
    batch: usize,
    seq: Option<usize>,
    with_seed_claims: bool,
) -> PyResult<String> {
    let cfg = parse_config(config_json)?;
    let report = ParamsReport::checked(&cfg, batch, seq, with_seed_claims).or_py()?;
    serde_json::to_string(&report).map_err(|e| value(e.to_string()))
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(params_report, m)?)?;
    Ok(())
}
