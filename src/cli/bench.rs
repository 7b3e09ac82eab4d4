//! `orthoformer bench`.

use super::Outcome;

/// Flags of `orthoformer bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs `orthoformer bench`.
pub fn run(_args: &BenchArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("bench", 6))
}
