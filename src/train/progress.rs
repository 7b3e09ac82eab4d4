//! One progress interface for every long library operation (training, a comparison's runs,
//! the MQAR grid): the library reports, the caller (a progress bar in the command line, a
//! callback in Python, nothing in tests) decides what to show. The library never prints.

use super::trainer::RunState;

/// Receives progress. Every method has an empty default, so an implementation takes only
/// what it shows.
pub trait Progress {
    /// A run starts: `label` names it, it will end at step `steps` and `done` steps are
    /// already done (a resumed run).
    fn start(&mut self, _label: &str, _steps: usize, _done: usize) {}
    /// After a training step: step number (1-based), its loss, learning rate.
    fn step(&mut self, _step: usize, _loss: f32, _lr: f64) {}
    /// After an evaluation (its record is the last of `state.metrics`).
    fn eval(&mut self, _state: &RunState) {}
}

/// Shows nothing (tests, library use).
pub struct Silent;

impl Progress for Silent {}
