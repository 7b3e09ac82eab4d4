//! `orthoformer init-probe`.

use super::Outcome;

/// Flags of `orthoformer init-probe`.
#[derive(Debug, clap::Args)]
pub struct InitProbeArgs {}

/// Runs `orthoformer init-probe`.
pub fn run(_args: &InitProbeArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("init-probe", 4))
}
