//! `orthoformer eval`: loss and perplexity of a trained checkpoint (`--checkpoint DIR`) or of
//! a pretrained Llama-style model (`--model FILE`). The two modes live in `eval_gpt.rs` and
//! `eval_llama.rs`.

use std::path::PathBuf;

use super::Outcome;

/// Flags of `orthoformer eval`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["checkpoint", "model"])))]
pub struct EvalArgs {
    /// A checkpoint folder written by `orthoformer train`.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// A pretrained model: a `.gguf` file, or a folder with `model.safetensors` + `config.json`.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Text to evaluate on (UTF-8). Checkpoint mode: defaults to the validation split of the
    /// training data. Model mode: defaults to the embedded TinyShakespeare.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Model mode: evaluate at most this many tokens of the text.
    #[arg(long)]
    pub max_tokens: Option<usize>,
    /// Model mode: context window of the sliding-window perplexity.
    #[arg(long)]
    pub context: Option<usize>,
    /// Checkpoint mode: number of batches to average the loss over.
    #[arg(long)]
    pub eval_iters: Option<usize>,
    /// Seed for batch sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `orthoformer eval`.
pub fn run(args: &EvalArgs) -> anyhow::Result<Outcome> {
    if args.model.is_some() {
        super::eval_llama::run(args)
    } else {
        super::eval_gpt::run(args)
    }
}
