//! `orthoformer params`.

use super::Outcome;

/// Flags of `orthoformer params`.
#[derive(Debug, clap::Args)]
pub struct ParamsArgs {}

/// Runs `orthoformer params`.
pub fn run(_args: &ParamsArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("params", 5))
}
