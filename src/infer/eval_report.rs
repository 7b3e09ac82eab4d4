//! The reports of `orthoformer eval`: a trained checkpoint or a pretrained model, the text,
//! and the one evaluation's figures ([`EvalReport`], from `model::eval`), both rendered by
//! the one table writer (`io::table`) with the same rows for the figures.

use std::path::PathBuf;

use serde::Serialize;

use crate::infer::eval::EvalReport;
use crate::io::table::{Align, Block, Report, Table};

/// `eval --checkpoint`: the checkpoint, the text and the loss on it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointEval {
    /// The checkpoint folder.
    pub checkpoint: PathBuf,
    /// The text scored, in words (`validation split of ...` or a file).
    pub data: String,
    /// The checkpoint's training step.
    pub step: usize,
    /// The tokenizer's name.
    pub tokenizer: String,
    /// Loss, perplexity and bits per unit.
    pub report: EvalReport,
    /// Wall time of the scoring.
    pub seconds: f64,
    /// Tokens scored per second.
    pub tokens_per_second: f64,
}

/// `eval --model`: a pretrained model's perplexity on a text.
#[derive(Debug, Clone, Serialize)]
pub struct ModelEval {
    /// The model file or folder.
    pub model: String,
    /// The text scored.
    pub data: String,
    /// `--context`: the Hugging Face window, one token longer than the report's `window`
    /// (its last row predicts nothing that is scored).
    pub context: usize,
    /// Loss (nll) and perplexity.
    pub report: EvalReport,
    /// Wall time of the scoring.
    pub seconds: f64,
    /// Tokens scored per second.
    pub tokens_per_second: f64,
}

fn two_columns() -> Table {
    Table::new(&[("", Align::Left), ("", Align::Left)])
}

/// The rows both reports share: what was scored, the loss, perplexity, bits per unit, speed.
fn figure_rows(t: &mut Table, data: &str, r: &EvalReport, seconds: f64, per_second: f64) {
    t.row(["data".to_string(), data.to_string()]);
    let overlap = if r.stride == r.window {
        "not overlapping".to_string()
    } else {
        format!("stride {}", r.stride)
    };
    t.row([
        "tokens".to_string(),
        format!(
            "{} scored in {} windows of {} ({overlap})",
            r.tokens, r.windows, r.window
        ),
    ]);
    t.row(["loss".to_string(), format!("{:.4} nats/token", r.loss)]);
    t.row(["perplexity".to_string(), format!("{:.3}", r.perplexity)]);
    if let Some(u) = &r.per_unit {
        t.row([
            format!("bits/{}", u.unit),
            format!("{:.4}", u.bits_per_unit),
        ]);
    }
    t.row([
        "speed".to_string(),
        format!("{per_second:.1} tokens/s scored ({seconds:.1} s)"),
    ]);
}

impl Report for CheckpointEval {
    fn blocks(&self) -> Vec<Block> {
        let mut t = two_columns();
        t.row([
            "checkpoint".to_string(),
            format!("{} (step {})", self.checkpoint.display(), self.step),
        ]);
        figure_rows(
            &mut t,
            &self.data,
            &self.report,
            self.seconds,
            self.tokens_per_second,
        );
        vec![Block::Table(t)]
    }
}

impl Report for ModelEval {
    fn blocks(&self) -> Vec<Block> {
        let mut t = two_columns();
        t.row(["model".to_string(), self.model.clone()]);
        figure_rows(
            &mut t,
            &self.data,
            &self.report,
            self.seconds,
            self.tokens_per_second,
        );
        vec![Block::Table(t)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(window: usize, stride: usize) -> EvalReport {
        EvalReport {
            loss: 1.5,
            perplexity: 1.5f64.exp(),
            tokens: 2048,
            window,
            stride,
            windows: 16,
            per_unit: None,
        }
    }

    #[test]
    fn headers_and_cells_agree() {
        let c = CheckpointEval {
            checkpoint: "runs/a".into(),
            data: "validation split of tinyshakespeare".into(),
            step: 600,
            tokenizer: "char".into(),
            report: report(64, 64).with_units(1.0, "character"),
            seconds: 2.0,
            tokens_per_second: 1024.0,
        };
        let m = ModelEval {
            model: "m.gguf".into(),
            data: "t.txt".into(),
            context: 256,
            report: report(255, 128),
            seconds: 3.0,
            tokens_per_second: 682.7,
        };
        for t in c.tables().into_iter().chain(m.tables()) {
            t.check().unwrap();
        }
        let text = c.render();
        // The label column is as wide as its longest label: "bits/character" keeps a space.
        assert!(text.contains("bits/character  2.1640"), "{text}");
        assert!(text.contains("2048 scored in 16 windows of 64 (not overlapping)"));
        let text = m.render();
        assert!(text.contains("682.7 tokens/s scored (3.0 s)"), "{text}");
        assert!(text.contains("windows of 255 (stride 128)"));
        assert!(!text.contains("bits/"));
    }
}
