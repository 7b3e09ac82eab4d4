//! `orthoformer init-bench`.

use super::Outcome;

/// Flags of `orthoformer init-bench`.
#[derive(Debug, clap::Args)]
pub struct InitBenchArgs {}

/// Runs `orthoformer init-bench`.
pub fn run(_args: &InitBenchArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("init-bench", 3))
}
