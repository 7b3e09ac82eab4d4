//! The reports of `orthoformer eval`: a trained checkpoint's loss on a text, and a pretrained
//! model's sliding-window perplexity, each rendered by the one table writer (`io::table`).

use std::path::PathBuf;

use serde::Serialize;

use super::evaluate::EvalReport;
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
}

/// `eval --model`: a pretrained model's perplexity on a text.
#[derive(Debug, Clone, Serialize)]
pub struct ModelEval {
    /// The model file or folder.
    pub model: String,
    /// The text scored.
    pub data: String,
    /// Tokens scored.
    pub tokens: usize,
    /// Window of the sliding-window perplexity.
    pub context: usize,
    /// Its stride.
    pub stride: usize,
    /// Mean negative log-likelihood, nats per token.
    pub nll: f64,
    /// `exp(nll)`.
    pub ppl: f64,
    /// Wall time of the scoring.
    pub seconds: f64,
    /// Tokens scored per second.
    pub tokens_per_second: f64,
}

fn two_columns() -> Table {
    Table::new(&[("", Align::Left), ("", Align::Left)])
}

impl Report for CheckpointEval {
    fn blocks(&self) -> Vec<Block> {
        let r = &self.report;
        let mut t = two_columns();
        t.row([
            "checkpoint".to_string(),
            format!("{} (step {})", self.checkpoint.display(), self.step),
        ]);
        t.row(["data".to_string(), self.data.clone()]);
        t.row(["tokens".to_string(), r.tokens.to_string()]);
        t.row(["loss".to_string(), format!("{:.4} nats/token", r.loss)]);
        t.row(["perplexity".to_string(), format!("{:.3}", r.perplexity)]);
        t.row([
            format!("bits/{}", r.unit),
            format!("{:.4}", r.bits_per_unit),
        ]);
        vec![Block::Table(t)]
    }
}

impl Report for ModelEval {
    fn blocks(&self) -> Vec<Block> {
        let mut t = two_columns();
        t.row(["model".to_string(), self.model.clone()]);
        t.row([
            "data".to_string(),
            format!(
                "{} ({} tokens, window {}, stride {})",
                self.data, self.tokens, self.context, self.stride
            ),
        ]);
        t.row(["nll".to_string(), format!("{:.4} nats/token", self.nll)]);
        t.row(["perplexity".to_string(), format!("{:.3}", self.ppl)]);
        t.row([
            "speed".to_string(),
            format!(
                "{:.1} tokens/s scored ({:.1} s)",
                self.tokens_per_second, self.seconds
            ),
        ]);
        vec![Block::Table(t)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_cells_agree() {
        let c = CheckpointEval {
            checkpoint: "runs/a".into(),
            data: "validation split of tinyshakespeare".into(),
            step: 600,
            tokenizer: "char".into(),
            report: EvalReport {
                loss: 1.5,
                perplexity: 1.5f64.exp(),
                bits_per_unit: 2.164,
                unit: "character".into(),
                tokens: 1000,
                units: 1000,
            },
        };
        let m = ModelEval {
            model: "m.gguf".into(),
            data: "t.txt".into(),
            tokens: 2048,
            context: 256,
            stride: 128,
            nll: 2.5,
            ppl: 2.5f64.exp(),
            seconds: 3.0,
            tokens_per_second: 682.7,
        };
        for t in c.tables().into_iter().chain(m.tables()) {
            t.check().unwrap();
        }
        let text = c.render();
        // The label column is as wide as its longest label: "bits/character" keeps a space.
        assert!(text.contains("bits/character  2.1640"), "{text}");
        assert!(m.render().contains("682.7 tokens/s scored (3.0 s)"));
    }
}
