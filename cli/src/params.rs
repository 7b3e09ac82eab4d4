//! `orthoformer params`: exact parameter, memory and FLOP accounting of a model configuration,
//! optionally beside seed 003's §4 claims.

use super::Outcome;
use anyhow::Context;
use orthoformer::analysis::params_report::{ParamsOptions, ParamsReport};
use orthoformer::model::{AttentionKind, GptConfig};
use std::path::PathBuf;

/// Flags of `orthoformer params`.
#[derive(Debug, clap::Args)]
pub struct ParamsArgs {
    /// Preset: tiny, seed-003, gpt2-small, config-a, config-b, shakespeare-char.
    #[arg(long, default_value_t = ParamsOptions::default().preset)]
    pub preset: String,
    /// A TOML model config (every GptConfig field); replaces --preset.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Attention: softmax, orthogonal, linear, orthogonal-linear, orthogonal-tied, identity-q,
    /// orthogonal-hadamard, orthogonal-trained (default: the config's).
    #[arg(long)]
    pub attention: Option<String>,
    /// Batch size for the activation memory.
    #[arg(long, default_value_t = ParamsOptions::default().batch)]
    pub batch: usize,
    /// Sequence length for activations and FLOPs (default: the context).
    #[arg(long)]
    pub seq: Option<usize>,
    /// Print seed 003's §4 claims beside the true figures.
    #[arg(long)]
    pub seed_claims: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

impl ParamsArgs {
    /// The library's options these flags ask for.
    pub fn options(&self) -> ParamsOptions {
        ParamsOptions {
            preset: self.preset.clone(),
            batch: self.batch,
            seq: self.seq,
            seed_claims: self.seed_claims,
        }
    }
}

/// Runs `orthoformer params`.
pub fn run(args: &ParamsArgs) -> anyhow::Result<Outcome> {
    let opts = args.options();
    let mut cfg = match &args.config {
        Some(p) => GptConfig::from_toml_file(p)?,
        None => GptConfig::preset(&opts.preset)?,
    };
    if let Some(a) = &args.attention {
        cfg.attention = AttentionKind::parse(a)?;
    }
    let mut report = ParamsReport::checked(&cfg, opts.batch, opts.seq, opts.seed_claims)?;
    report.process_peak_rss_bytes = orthoformer::io::rss::peak_rss_bytes();
    super::common::emit(&report, args.json).context("writing the report")?;
    Ok(Outcome::Success)
}
