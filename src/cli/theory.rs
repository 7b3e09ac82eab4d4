//! `orthoformer theory`.

use super::Outcome;

/// Flags of `orthoformer theory`.
#[derive(Debug, clap::Args)]
pub struct TheoryArgs {}

/// Runs `orthoformer theory`.
pub fn run(_args: &TheoryArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("theory", 8))
}
