//! The resumable state of a run besides the model: everything that decides the next step
//! (step, the batch source's position, AdamW moments), so restoring it with the parameters
//! continues the run bit for bit.

use super::adamw::AdamW;
use super::metrics::MetricRecord;
use super::options::TrainOptions;

/// The resumable state of a run (besides the model).
#[derive(Debug, Clone)]
pub struct RunState {
    /// Optimizer steps done.
    pub step: usize,
    /// Position of the training batch source ([`super::batches::Batches::position`]).
    pub sampler_pos: u128,
    /// Optimizer state.
    pub adam: AdamW,
    /// Evaluation records so far.
    pub metrics: Vec<MetricRecord>,
    /// Step of the last checkpoint written (`None` before the first).
    pub last_checkpoint: Option<usize>,
    /// Sum of the training losses since the last record (for its `step_loss`).
    pub window_loss: f64,
    /// Steps since the last record.
    pub window_steps: usize,
}

impl RunState {
    /// The state before the first step, for `n` trainable parameters.
    pub fn fresh(opts: &TrainOptions, n: usize) -> Self {
        RunState {
            step: 0,
            sampler_pos: 0,
            adam: AdamW::new(opts.adamw, n),
            metrics: Vec::new(),
            last_checkpoint: None,
            window_loss: 0.0,
            window_steps: 0,
        }
    }
}
