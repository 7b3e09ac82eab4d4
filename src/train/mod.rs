//! Training: AdamW, the learning-rate schedule, the training loop, checkpoints and resume.

/// Training stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A bad option or state; the message says which.
    #[error("{0}")]
    Invalid(String),
}
