//! `orthoformer generate` in its pretrained-model (`--model`) mode.

use super::Outcome;
use super::generate::GenerateArgs;

/// Runs this mode of `orthoformer generate`.
pub fn run(_args: &GenerateArgs) -> anyhow::Result<Outcome> {
    Err(super::common::not_built("generate", 7))
}
