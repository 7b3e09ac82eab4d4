//! Multi-query associative recall (MQAR, from the Zoology benchmark): the seeded task
//! generator, scoring of a model's logits on the queried positions, and the accuracy heatmap.

pub mod generator;
pub mod heatmap;
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
