//! `orthoformer eval` in its checkpoint (`--checkpoint`) mode.

use super::Outcome;
use super::eval::EvalArgs;

/// Runs this mode of `orthoformer eval`.
pub fn run(_args: &EvalArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("eval", 6))
}
