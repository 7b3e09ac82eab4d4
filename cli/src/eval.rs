//! `orthoformer eval`: loss and perplexity of a trained checkpoint (`--checkpoint DIR`, on
//! the validation split of its training text or `--data`) or of a pretrained Llama-style model
//! (`--model FILE`, on `--data` or the embedded TinyShakespeare). The flags become the
//! library's [`EvalJob`], run by its operation for the model kind
//! ([`orthoformer::train::checkpoint::eval::run`], [`eval_job::run_pretrained`]).

use std::path::PathBuf;

use super::Outcome;
use super::common::{LazyBar, emit};
use orthoformer::infer::eval_job::{self, EvalJob};
use orthoformer::train::checkpoint;

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
    /// Model mode: window of the sliding-window perplexity, in tokens (Hugging Face's
    /// `max_length`: each window scores its tokens after the first) [default: 256].
    #[arg(long)]
    pub context: Option<usize>,
    /// Tokens from one window to the next; each window scores only tokens no earlier window
    /// scored [default: checkpoint mode, the model's context (windows do not overlap); model
    /// mode, half of --context].
    #[arg(long)]
    pub stride: Option<usize>,
    /// Score only this many batches (checkpoint mode: of the training batch size in windows;
    /// model mode: windows) [default: the whole text].
    #[arg(long)]
    pub eval_iters: Option<usize>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Model mode: how the KV cache stores keys and values: f32 (exact), f16, or 8/4-bit codes
    /// per token and head (q8, q4; q8-gN, q4-gN for groups of N values).
    #[arg(long, default_value = "f32", value_parser = super::generate::parse_kv_cache)]
    pub kv_cache: orthoformer::model::llama::KvDtype,
    /// Model mode: activation quantisation and R3.
    #[command(flatten)]
    pub quant: super::quantize_flags::RuntimeQuantArgs,
}

impl EvalArgs {
    /// The library's job these flags ask for.
    pub fn job(&self) -> anyhow::Result<EvalJob> {
        Ok(EvalJob {
            data: self.data.clone(),
            max_tokens: self.max_tokens,
            context: self.context,
            stride: self.stride,
            eval_iters: self.eval_iters,
            kv_cache: self.kv_cache,
            runtime: self.quant.runtime()?,
        })
    }
}

/// Runs `orthoformer eval`.
pub fn run(args: &EvalArgs) -> anyhow::Result<Outcome> {
    let job = args.job()?;
    let mut bar = LazyBar::new("eval", args.json);
    let mut progress = |done: usize, total: usize| bar.set(done, total);
    if let Some(path) = &args.model {
        let report = eval_job::run_pretrained(path, &job, &mut progress);
        bar.finish();
        emit(&report?, args.json)?;
    } else if let Some(dir) = &args.checkpoint {
        if args.quant.any() || args.kv_cache != orthoformer::model::llama::KvDtype::F32 {
            anyhow::bail!(
                "--abits, --act-clip, --act-asym, --qk-hadamard and --kv-cache apply to --model only"
            );
        }
        let report = checkpoint::eval::run(dir, &job, &mut progress);
        bar.finish();
        emit(&report?, args.json)?;
    } else {
        anyhow::bail!("pass --checkpoint DIR or --model FILE");
    }
    Ok(Outcome::Success)
}
