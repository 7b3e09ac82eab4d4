//! `orthoformer compare`.

use super::Outcome;

/// Flags of `orthoformer compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {}

/// Runs `orthoformer compare`.
pub fn run(_args: &CompareArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("compare", 6))
}
