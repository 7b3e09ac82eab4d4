//! One callback interface for every library operation that trains (a run, a comparison's
//! runs, the MQAR grid): the loop reports each run's start, each step and each evaluation,
//! and hands the model and its state to the observer at every evaluation, where a session
//! writes its checkpoint. The library never prints: the caller (a progress bar in the command
//! line, nothing in tests) decides what to show.

use super::run_state::RunState;
use crate::Result;

/// Receives a training run's progress; `M` is the model trained. Every method has a default
/// that does nothing, so an implementation takes only what it needs.
pub trait Observer<M: ?Sized> {
    /// A run starts: `label` names it, it will end at step `steps` and `done` steps are
    /// already done (a resumed run).
    fn start(&mut self, _label: &str, _steps: usize, _done: usize) {}

    /// After each training step: step number (1-based), its loss, learning rate.
    fn step(&mut self, _step: usize, _loss: f32, _lr: f64) {}

    /// After each evaluation (its record is the last of `state.metrics`), and when the loop
    /// stops early (Ctrl-C, `stop_at`): the moment to checkpoint `model` and `state`. An error
    /// stops the loop.
    fn eval(&mut self, _model: &M, _state: &RunState) -> Result<()> {
        Ok(())
    }
}

/// Shows nothing and keeps nothing (tests, library use).
pub struct Silent;

impl<M: ?Sized> Observer<M> for Silent {}
