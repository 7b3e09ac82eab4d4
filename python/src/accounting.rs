//! Accounting (`orthoformer::model::accounting`): the exact parameter, memory and FLOP report
//! of a configuration that `orthoformer params` prints, as JSON.

use pyo3::prelude::*;

use orthoformer::model::accounting::account;
use orthoformer::model::seed_claims::seed_claims;

use crate::error::value;
use crate::model::parse_config;

/// The account of `config_json` (a `GptConfig`) with activations for a `batch x seq` batch
/// (`seq` defaults to the context), as JSON `{"config", "account"[, "seed_claims"]}`.
#[pyfunction]
#[pyo3(signature = (config_json, batch=8, seq=None, with_seed_claims=false))]
fn params_report(
    config_json: &str,
    batch: usize,
    seq: Option<usize>,
    with_seed_claims: bool,
) -> PyResult<String> {
    let cfg = parse_config(config_json)?;
    let seq = seq.unwrap_or(cfg.context);
    if seq == 0 || seq > cfg.context {
        return Err(value(format!(
            "seq {seq} must be between 1 and the context {}",
            cfg.context
        )));
    }
    if batch == 0 {
        return Err(value("batch must be at least 1"));
    }
    let mut report = serde_json::json!({ "config": &cfg, "account": account(&cfg, batch, seq) });
    if with_seed_claims {
        report["seed_claims"] = serde_json::json!(seed_claims(&cfg, batch, seq));
    }
    Ok(report.to_string())
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(params_report, m)?)?;
    Ok(())
}
