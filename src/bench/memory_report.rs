//! The options and the report of `orthoformer memory`: measured peak resident memory of
//! training runs beside the prediction of [`crate::bench::memory::predict`], one row per
//! configuration and variant.

use crate::bench::memory::RunMemory;
use crate::bench::options::BenchShape;
use crate::io::rss::mib;
use crate::io::table::{Align, Block, Report, Table};
use crate::model::AttentionKind;

/// What `orthoformer memory` measures; `Default` holds the command's only defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryOptions {
    /// Training shapes.
    pub configs: Vec<BenchShape>,
    /// Attention variants run on each shape.
    pub attention: Vec<AttentionKind>,
    /// Training steps of each child run.
    pub steps: usize,
    /// Largest accepted `|measured / predicted - 1|`.
    pub tolerance: f64,
}

impl Default for MemoryOptions {
    /// Shapes A and B, every variant, 3 steps per run, within 10%.
    fn default() -> Self {
        MemoryOptions {
            configs: vec![BenchShape::A, BenchShape::B],
            attention: AttentionKind::ALL.to_vec(),
            steps: 3,
            tolerance: 0.10,
        }
    }
}

impl MemoryOptions {
    /// Checks the options; the error names the flag.
    pub fn validate(&self) -> crate::Result<()> {
        if self.steps == 0 {
            return Err(crate::train::invalid("--steps must be at least 1"));
        }
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            return Err(crate::train::invalid(
                "--tolerance must be 0 or a positive number, e.g. 0.1",
            ));
        }
        Ok(())
    }
}

/// The measured baselines, in bytes (`None`: not reported on this system).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MemoryBaseline {
    /// Peak of the idle binary (`orthoformer params --preset tiny`).
    pub idle: Option<u64>,
    /// Peak of the baseline training run (the `tiny` preset on a short text).
    pub tiny_run: Option<u64>,
    /// `tiny_run` less its predicted model and data: the baseline of the predictions.
    pub training: Option<u64>,
}

/// One measured run beside its prediction.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MemoryRow {
    /// Configuration label (`A`, `B`, `tiny`).
    pub config: String,
    /// Attention variant.
    pub attention: String,
    /// Sequences per batch.
    pub batch: usize,
    /// Sequence length.
    pub context: usize,
    /// The prediction, by component.
    pub predicted: RunMemory,
    /// The child's peak resident memory (`None`: not reported on this system).
    pub measured_bytes: Option<u64>,
    /// measured / predicted.
    pub ratio: Option<f64>,
    /// `|ratio - 1| <= tolerance`.
    pub within_tolerance: Option<bool>,
}

/// Everything `orthoformer memory` reports.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MemoryReport {
    /// The measured process baselines.
    pub baseline: MemoryBaseline,
    /// Largest accepted `|measured / predicted - 1|`.
    pub tolerance: f64,
    /// Training steps of each child run.
    pub steps: usize,
    /// One row per configuration and variant.
    pub rows: Vec<MemoryRow>,
}

impl MemoryReport {
    /// Whether every measured row is within the tolerance.
    pub fn all_within_tolerance(&self) -> bool {
        self.rows.iter().all(|r| r.within_tolerance != Some(false))
    }
}

impl Report for MemoryReport {
    fn blocks(&self) -> Vec<Block> {
        let b = &self.baseline;
        let head = match (b.idle, b.tiny_run, b.training) {
            (Some(i), Some(t), Some(base)) => format!(
                "process baseline {:.1} MiB: peak of a tiny training run ({:.1} MiB) less its \
                 own model and data; the idle binary (`orthoformer params`) peaks at {:.1} MiB",
                mib(base),
                mib(t),
                mib(i)
            ),
            _ => "peak resident memory is not reported on this system: nothing measured".into(),
        };
        let (l, r) = (Align::Left, Align::Right);
        let mut t = Table::new(&[
            ("cfg", l),
            ("attention", l),
            ("base", r),
            ("data", r),
            ("tok", r),
            ("weights", r),
            ("grads", r),
            ("adamw", r),
            ("acts", r),
            ("ckpt", r),
            ("predicted", r),
            ("measured", r),
            ("ratio", r),
            ("ok", l),
        ]);
        let m = |x: usize| format!("{:.1}", mib(x as u64));
        for row in &self.rows {
            let p = &row.predicted;
            t.row([
                row.config.clone(),
                row.attention.clone(),
                m(p.baseline),
                m(p.data),
                m(p.data_transient),
                m(p.weights),
                m(p.gradients),
                m(p.adamw),
                m(p.activations),
                m(p.checkpoint_write),
                m(p.total),
                row.measured_bytes
                    .map_or("-".into(), |x| format!("{:.1}", mib(x))),
                row.ratio.map_or("-".into(), |x| format!("{x:.3}")),
                match row.within_tolerance {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "-",
                }
                .to_string(),
            ]);
        }
        t.note(format!(
            "MiB; predicted = base + data + max(tok, weights + grads + adamw + acts + ckpt): tok \
             is the text and token list while tokenizing, ckpt the checkpoint write buffer; ok: \
             within {:.0}%",
            100.0 * self.tolerance
        ));
        vec![Block::Text(head), Block::Table(t)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_cells_agree() {
        let predicted = crate::bench::memory::predict(
            &crate::model::GptConfig::preset("tiny").unwrap(),
            4,
            8,
            crate::bench::memory::DataMemory::new(100, 100, false),
            1 << 20,
        )
        .unwrap();
        let row = MemoryRow {
            config: "tiny".into(),
            attention: "softmax".into(),
            batch: 4,
            context: 8,
            predicted,
            measured_bytes: Some(3 << 20),
            ratio: Some(1.01),
            within_tolerance: Some(true),
        };
        let report = MemoryReport {
            baseline: MemoryBaseline {
                idle: Some(1 << 20),
                tiny_run: Some(2 << 20),
                training: Some(1 << 20),
            },
            tolerance: 0.1,
            steps: 3,
            rows: vec![
                row.clone(),
                MemoryRow {
                    measured_bytes: None,
                    ratio: None,
                    ..row
                },
            ],
        };
        for t in report.tables() {
            t.check().unwrap();
        }
        let text = report.render();
        assert!(text.contains("predicted"), "{text}");
    }
}
