//! Multi-query associative recall (MQAR, from the Zoology benchmark): the seeded task
//! generator, what the training loop trains on (`feed`: batches and held-out losses;
//! `masked`: the model on its masked loss), the sweep (`run`), scoring of a model's logits
//! on the queried positions, the report and the accuracy heatmap; and the same grid trained
//! until accuracy plateaus (`converge`: one run; `plateau`: the stopping rule;
//! `converge_sweep`: the grid with a file per run, resumable; `converge_report`).

pub mod converge;
pub mod converge_report;
pub mod converge_sweep;
pub mod feed;
pub(crate) mod generator;
pub mod heatmap;
pub(crate) mod masked;
pub mod plateau;
pub mod score;

pub use generator::{IGNORE, MqarBatch, MqarTask};

/// What can go wrong in the MQAR harness.
#[derive(Debug, thiserror::Error)]
pub enum MqarError {
    /// The task's shape is impossible (odd length, too many pairs, vocabulary too small).
    #[error("bad MQAR task: {0}")]
    BadTask(String),
    /// Buffers handed to a scorer or plot disagree in size.
    #[error("MQAR shape mismatch: {0}")]
    Shape(String),
    /// Drawing a plot failed.
    #[error("drawing the MQAR plot {path}: {why}")]
    Plot {
        /// The file being drawn.
        path: String,
        /// The backend's message.
        why: String,
    },
}
pub mod report;
pub mod run;
pub mod sweep;

impl Default for run::MqarPlan {
    /// The default grid of `orthoformer mqar` (the only place it is written): settings 64:4,
    /// 128:8, 256:16 and 512:64 at widths 64, 128 and 256, every attention variant, learning
    /// rates 1e-3 and 3e-3, 1,000 steps of 32 examples, 512 held-out examples, heads of width
    /// 32, Zoology's 2 layers and weight decay 0.1, the task's default vocabulary, seed 0,
    /// learned absolute positions, a fixed score temperature.
    fn default() -> Self {
        run::MqarPlan {
            settings: vec![(64, 4), (128, 8), (256, 16), (512, 64)],
            widths: vec![64, 128, 256],
            variants: crate::model::AttentionKind::ALL.to_vec(),
            lrs: vec![1e-3, 3e-3],
            steps: 1000,
            batch: 32,
            eval_examples: 512,
            head_dim: 32,
            layers: 2,
            vocab: generator::DEFAULT_VOCAB,
            weight_decay: 0.1,
            seed: 0,
            position: crate::model::Position::Learned,
            temperature: crate::model::Temperature::Fixed,
        }
    }
}

impl run::MqarPlan {
    /// The small run of `mqar --quick` (45 s measured on 2 cores with the seven variants before
    /// orthogonal-trained): this plan with setting 64:4, width 64, one learning rate (3e-3),
    /// 400 steps, vocabulary 512 and 256 held-out examples.
    pub fn quick(self) -> Self {
        run::MqarPlan {
            settings: vec![(64, 4)],
            widths: vec![64],
            lrs: vec![3e-3],
            steps: 400,
            vocab: 512,
            eval_examples: 256,
            ..self
        }
    }
}
