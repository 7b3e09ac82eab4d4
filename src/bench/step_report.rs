//! The report of `orthoformer bench` (training steps): per shape and attention variant,
//! Orthoformer's and PyTorch's milliseconds per step, tokens per second, the speed-up, the FLOP
//! rate on the step's counted FLOPs and its share of the f32 GEMM peak measured in the same
//! run. Rendered by the one table writer (`io::table`); the JSON is the serde form.

use serde::Serialize;

use crate::io::table::{Align, Block, Report, Table};

/// Timing of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTiming {
    /// Median milliseconds per step.
    pub ms_per_step: f64,
    /// Tokens per second at the median.
    pub tokens_per_s: f64,
    /// Counted FLOPs per step.
    pub flops_per_step: f64,
    /// Achieved GFLOP/s at the median.
    pub gflops: f64,
    /// Trainable parameters.
    pub trainable: usize,
    /// Loss of the last step (a sanity check that the step did real work).
    pub last_loss: f32,
}

/// One shape and attention variant, each side at its best round.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepBenchRow {
    /// Configuration label (`A`, `B`).
    pub config: String,
    /// Attention variant.
    pub attention: String,
    /// Sequences per batch.
    pub batch: usize,
    /// Sequence length.
    pub context: usize,
    /// Orthoformer's timing (best round).
    pub orthoformer: StepTiming,
    /// Orthoformer's GFLOP/s over the GEMM peak.
    pub gemm_peak_share: f64,
    /// PyTorch's median ms per step (best round), when it ran.
    pub torch_ms_per_step: Option<f64>,
    /// PyTorch's tokens per second at that median.
    pub torch_tokens_per_s: Option<f64>,
    /// torch ms / orthoformer ms: above 1 means Orthoformer is faster.
    pub speedup_vs_torch: Option<f64>,
    /// PyTorch's rate on the same counted FLOPs.
    pub torch_gflops: Option<f64>,
    /// Why PyTorch did not run (`None` when it ran or was not asked for).
    pub torch_error: Option<String>,
    /// Orthoformer's median ms per step in each round (the row reports the best).
    pub orthoformer_ms_rounds: Vec<f64>,
    /// PyTorch's median ms per step in each round that ran.
    pub torch_ms_rounds: Vec<f64>,
}

/// Everything `orthoformer bench` reports for training steps.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepBenchReport {
    /// Threads on both sides.
    pub threads: usize,
    /// The best GEMM reading over the rounds, GFLOP/s.
    pub gemm_peak_gflops: f64,
    /// The GEMM reading of every round.
    pub gemm_peak_rounds: Vec<f64>,
    /// One row per shape and variant.
    pub rows: Vec<StepBenchRow>,
}

impl Report for StepBenchReport {
    fn blocks(&self) -> Vec<Block> {
        let peak = self.gemm_peak_gflops;
        let rounds = self.gemm_peak_rounds.len();
        let mut head = format!(
            "f32 GEMM peak (1024^3, {} threads, best of {rounds} rounds): {peak:.1} GFLOP/s",
            self.threads
        );
        if rounds > 1 {
            let each: Vec<String> = self
                .gemm_peak_rounds
                .iter()
                .map(|p| format!("{p:.1}"))
                .collect();
            head += &format!(
                "\n  per round: {} (a low reading means other load; each side's best round is \
                 shown, every round is in --json)",
                each.join(", ")
            );
        }
        let (l, r) = (Align::Left, Align::Right);
        let mut t = Table::new(&[
            ("cfg", l),
            ("attention", l),
            ("ours ms", r),
            ("tok/s", r),
            ("torch ms", r),
            ("tok/s", r),
            ("speedup", r),
            ("GFLOP/s", r),
            ("% peak", r),
            ("torch GF", r),
            ("% peak", r),
        ]);
        let opt = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |v| format!("{v:.p$}"));
        let pct = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}%", 100.0 * v));
        for row in &self.rows {
            let o = &row.orthoformer;
            t.row([
                row.config.clone(),
                row.attention.clone(),
                format!("{:.2}", o.ms_per_step),
                format!("{:.0}", o.tokens_per_s),
                opt(row.torch_ms_per_step, 2),
                opt(row.torch_tokens_per_s, 0),
                row.speedup_vs_torch
                    .map_or("-".into(), |s| format!("{s:.2}x")),
                format!("{:.1}", o.gflops),
                pct(Some(row.gemm_peak_share)),
                opt(row.torch_gflops, 1),
                pct(row.torch_gflops.map(|g| g / peak)),
            ]);
            if let Some(e) = &row.torch_error {
                t.note(format!("torch ({} {}): {e}", row.config, row.attention));
            }
        }
        vec![Block::Text(head), Block::Table(t)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_cells_agree() {
        let timing = StepTiming {
            ms_per_step: 10.0,
            tokens_per_s: 204_800.0,
            flops_per_step: 1e9,
            gflops: 100.0,
            trainable: 1000,
            last_loss: 5.5,
        };
        let row = StepBenchRow {
            config: "A".into(),
            attention: "softmax".into(),
            batch: 16,
            context: 128,
            orthoformer: timing,
            gemm_peak_share: 0.5,
            torch_ms_per_step: Some(20.0),
            torch_tokens_per_s: Some(102_400.0),
            speedup_vs_torch: Some(2.0),
            torch_gflops: Some(50.0),
            torch_error: None,
            orthoformer_ms_rounds: vec![10.0, 11.0],
            torch_ms_rounds: vec![20.0, 21.0],
        };
        let report = StepBenchReport {
            threads: 2,
            gemm_peak_gflops: 200.0,
            gemm_peak_rounds: vec![200.0, 150.0],
            rows: vec![
                row.clone(),
                StepBenchRow {
                    torch_ms_per_step: None,
                    torch_tokens_per_s: None,
                    speedup_vs_torch: None,
                    torch_gflops: None,
                    torch_error: Some("no torch".into()),
                    torch_ms_rounds: vec![],
                    ..row
                },
            ],
        };
        for t in report.tables() {
            t.check().unwrap();
        }
        let text = report.render();
        assert!(text.contains("2.00x") && text.contains("25.0%"), "{text}");
        assert!(text.contains("torch (A softmax): no torch"), "{text}");
    }
}
