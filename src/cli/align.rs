//! `orthoformer align`.

use super::Outcome;

/// Flags of `orthoformer align`.
#[derive(Debug, clap::Args)]
pub struct AlignArgs {}

/// Runs `orthoformer align`.
pub fn run(_args: &AlignArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("align", 7))
}
