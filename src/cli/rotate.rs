//! `orthoformer rotate`.

use super::Outcome;

/// Flags of `orthoformer rotate`.
#[derive(Debug, clap::Args)]
pub struct RotateArgs {}

/// Runs `orthoformer rotate`.
pub fn run(_args: &RotateArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("rotate", 7))
}
