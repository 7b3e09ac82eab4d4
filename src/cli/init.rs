//! `orthoformer init`.

use super::Outcome;

/// Flags of `orthoformer init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {}

/// Runs `orthoformer init`.
pub fn run(_args: &InitArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("init", 3))
}
