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
    /// Global gradient norm of the last step before this record, before clipping (`None` at
    /// step 0, and in logs written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_norm: Option<f64>,
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
    parse_jsonl(&crate::io::safe_file::read_regular_text(path)?, path)
}

/// Parses the text of a JSON Lines metrics file (`path` names it in errors), as every reader
/// does: one record a line, every loss a number.
pub fn parse_jsonl(text: &str, path: &Path) -> Result<Vec<MetricRecord>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| super::invalid(format!("{} line {}: {e}", path.display(), i + 1)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Random finite floats of every magnitude, written and read back, keep their bits, and a
    /// log read and rewritten is byte-identical (`serde_json`'s default float parser is off by
    /// an ulp on some inputs; the crate's `float_roundtrip` feature is what makes this hold).
    #[test]
    fn records_round_trip_bit_for_bit() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let f64_any = |rng: &mut rand_chacha::ChaCha8Rng| loop {
            let x = f64::from_bits(rng.random());
            if x.is_finite() {
                return x;
            }
        };
        let f32_any = |rng: &mut rand_chacha::ChaCha8Rng| loop {
            let x = f32::from_bits(rng.random());
            if x.is_finite() {
                return x;
            }
        };
        let records: Vec<MetricRecord> = (0..20_000)
            .map(|i| MetricRecord {
                step: i,
                train_loss: f32_any(&mut rng),
                val_loss: f32_any(&mut rng),
                step_loss: Some(f32_any(&mut rng)),
                lr: f64_any(&mut rng),
                tokens_per_s: Some(f64_any(&mut rng)),
                ms_per_step: Some(rng.random::<f64>() * 1e3),
                peak_rss_bytes: Some(rng.random()),
                grad_norm: Some(f64_any(&mut rng)),
            })
            .collect();
        let mut bytes = Vec::new();
        write_records(&mut bytes, &records).unwrap();
        let back: Vec<MetricRecord> = std::str::from_utf8(&bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for (a, b) in records.iter().zip(&back) {
            assert_eq!(a.lr.to_bits(), b.lr.to_bits(), "{}", a.lr);
            assert_eq!(a.train_loss.to_bits(), b.train_loss.to_bits());
            assert_eq!(a, b);
        }
        let mut again = Vec::new();
        write_records(&mut again, &back).unwrap();
        assert_eq!(again, bytes);
    }
}
