//! `orthoformer generate`: sample text from a trained checkpoint (`--checkpoint DIR`) or a
//! pretrained Llama-style model (`--model FILE`), streamed to stdout and reproducible by seed.
//! The two modes live in `generate_gpt.rs` and `generate_llama.rs`.

use std::path::PathBuf;

use super::Outcome;
use orthoformer::train::generate::SampleOptions;

/// Flags of `orthoformer generate`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["checkpoint", "model"])))]
pub struct GenerateArgs {
    /// A checkpoint folder written by `orthoformer train`.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// A pretrained model: a `.gguf` file, or a folder with `model.safetensors` + `config.json`.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The text to continue.
    #[arg(long, default_value = "")]
    pub prompt: String,
    /// How many tokens to generate.
    #[arg(long, default_value_t = 200)]
    pub max_new_tokens: usize,
    /// Sampling temperature; 0 means greedy (always the most likely token).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f32,
    /// Sample only among the `k` most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Sample only among the most likely tokens whose probabilities add up to `p` (1: all).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f64,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl GenerateArgs {
    /// The sampling settings, validated the same way for both modes.
    pub fn sample_options(&self) -> SampleOptions {
        SampleOptions {
            max_new_tokens: self.max_new_tokens,
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
        }
    }
}

/// Runs `orthoformer generate`.
pub fn run(args: &GenerateArgs) -> anyhow::Result<Outcome> {
    args.sample_options().validate()?;
    if args.model.is_some() {
        super::generate_llama::run(args)
    } else {
        super::generate_gpt::run(args)
    }
}
