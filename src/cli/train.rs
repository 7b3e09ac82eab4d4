//! `orthoformer train`.

use super::Outcome;

/// Flags of `orthoformer train`.
#[derive(Debug, clap::Args)]
pub struct TrainArgs {}

/// Runs `orthoformer train`.
pub fn run(_args: &TrainArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("train", 6))
}
