//! `orthoformer mqar`.

use super::Outcome;

/// Flags of `orthoformer mqar`.
#[derive(Debug, clap::Args)]
pub struct MqarArgs {}

/// Runs `orthoformer mqar`.
pub fn run(_args: &MqarArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("mqar", 8))
}
