//! The metrics log: one JSON object per evaluation, written as JSON Lines
//! (`metrics.jsonl`), rewritten whole and atomically at each checkpoint so it always matches
//! the checkpoint beside it.

use std::io::Write;
use std::path::Path;

use crate::{Error, Result};

/// One evaluation point.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MetricRecord {
    /// Optimizer steps done.
    pub step: usize,
    /// Loss on the training split (fixed evaluation batches, no dropout).
    pub train_loss: f32,
    /// Loss on the validation split (fixed evaluation batches, no dropout).
    pub val_loss: f32,
    /// Mean loss of the training steps since the previous record (`None` at step 0).
    pub step_loss: Option<f32>,
    /// Learning rate of the last step (peak rate at step 0).
    pub lr: f64,
    /// Training throughput since the previous record (`None` at step 0).
    pub tokens_per_s: Option<f64>,
    /// Milliseconds per training step since the previous record.
    pub ms_per_step: Option<f64>,
    /// Peak resident memory of the process up to this evaluation, in bytes (before the
    /// checkpoint written after it; `None` where the system does not report it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
}

/// Writes `records` to `w` as JSON Lines. Floats are written in their shortest form that
/// reads back to the same bits (and read with `serde_json`'s `float_roundtrip`), so reading
/// and rewriting a log gives the same bytes.
pub fn write_records(w: &mut dyn Write, records: &[MetricRecord]) -> std::io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *w, r).map_err(std::io::Error::other)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes `records` to `path` as JSON Lines, atomically.
pub fn write_jsonl(path: &Path, records: &[MetricRecord]) -> Result<()> {
    crate::io::write_atomic(path, |w| {
        write_records(w, records).map_err(|e| Error::io(path, e))
    })
}

/// Reads a JSON Lines metrics file.
pub fn read_jsonl(path: &Path) -> Result<Vec<MetricRecord>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| super::invalid(format!("{} line {}: {e}", path.display(), i + 1)))
        })
        .collect()
}
