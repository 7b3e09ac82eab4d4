//! `orthoformer quantize`.

use super::Outcome;

/// Flags of `orthoformer quantize`.
#[derive(Debug, clap::Args)]
pub struct QuantizeArgs {}

/// Runs `orthoformer quantize`.
pub fn run(_args: &QuantizeArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("quantize", 7))
}
