//! Multi-query associative recall (MQAR, from the Zoology benchmark): the seeded task
//! generator, what the training loop trains on (`feed`: batches and held-out losses;
//! `masked`: the model on its masked loss), the sweep (`run`), scoring of a model's logits
//! on the queried positions, the report and the accuracy heatmap.

pub mod feed;
pub mod generator;
pub mod heatmap;
pub mod masked;
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
