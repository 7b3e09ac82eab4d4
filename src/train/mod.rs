//! Training: AdamW, the learning-rate schedule, gradient clipping, the training loop (with
//! its batch sources and evaluations), sessions (fresh or resumed), crash-safe checkpoints,
//! metrics and recipes. What runs a model once it is trained is in `infer`; the comparison of
//! variants built from training runs is in `experiments`.

pub mod adamw;
pub(crate) mod batches;
pub mod checkpoint;
pub mod clip;
pub(crate) mod gpt_adapter;
pub(crate) mod loop_eval;
pub mod metrics;
pub(crate) mod model_api;
pub mod model_choice;
pub mod observer;
pub mod options;
pub mod prepared;
pub mod recipe;
pub(crate) mod request;
pub mod run_record;
pub mod run_state;
pub mod schedule;
pub mod session;
pub mod token_batches;
pub mod trainer;

pub use adamw::{AdamW, AdamWConfig};
pub use batches::Batches;
pub use loop_eval::Evaluate;
pub use metrics::MetricRecord;
pub use model_api::Trainable;
pub use observer::{Observer, Silent};
pub use options::TrainOptions;
pub use run_state::RunState;
pub use trainer::{Limits, train, train_on};

/// Training stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A bad option or state; the message says which.
    #[error("{0}")]
    Invalid(String),
    /// The loss or the gradient norm became NaN or infinite.
    #[error(
        "the {what} became {value} at step {step}, so training stopped; {}; lower `lr`, raise \
         `warmup` or set `grad_clip`",
        match last_checkpoint {
            Some(s) => format!("the last good checkpoint (step {s}) is kept"),
            None => "no checkpoint had been written yet".to_string(),
        }
    )]
    NonFinite {
        /// The step whose loss or gradient was not finite (1-based).
        step: usize,
        /// "loss" or "gradient norm".
        what: &'static str,
        /// The value (NaN or ±inf).
        value: f64,
        /// The last checkpoint written, if any.
        last_checkpoint: Option<usize>,
    },
    /// A checkpoint could not be written (full disk, I/O error); the folder keeps the
    /// previous one.
    #[error(
        "cannot write the checkpoint in {} ({why}); the previous checkpoint there, if any, is \
         intact: free disk space (or choose another `out`) and continue with `resume`",
        dir.display()
    )]
    CheckpointWrite {
        /// The checkpoint folder.
        dir: std::path::PathBuf,
        /// Which file and the system's reason.
        why: String,
    },
    /// Ctrl-C: a checkpoint was written at `step`.
    #[error("interrupted at step {step}; a checkpoint was written: continue with `resume`")]
    Interrupted {
        /// Steps done when the checkpoint was written.
        step: usize,
    },
    /// Ctrl-C while several runs trained (a comparison, a ladder): every run's checkpoint is
    /// kept; `resume` is the command that continues them all.
    #[error("interrupted at step {step}; every run's checkpoint is kept: continue with `{resume}`")]
    InterruptedAll {
        /// The most steps any run had done.
        step: usize,
        /// The command that continues.
        resume: String,
    },
}

impl TrainError {
    /// Whether this is an interruption that left checkpoints to resume from.
    pub fn is_interruption(&self) -> bool {
        matches!(
            self,
            TrainError::Interrupted { .. } | TrainError::InterruptedAll { .. }
        )
    }
}

/// Shorthand for a [`TrainError::Invalid`] wrapped in the crate error.
pub(crate) fn invalid(msg: impl Into<String>) -> crate::Error {
    crate::Error::Train(TrainError::Invalid(msg.into()))
}
