//! `orthoformer eval`: loss and perplexity of a trained checkpoint (`--checkpoint DIR`, on
//! the validation split of its training text or `--data`) or of a pretrained Llama-style model
//! (`--model FILE`, on `--data` or the embedded TinyShakespeare). The flags become the
//! library's [`EvalJob`], run by its operation for the model kind
//! ([`orthoformer::train::checkpoint::probes::run`], [`eval_job::run_pretrained`]).
//! `--by-position` and `--induction` add the checkpoint's loss by position in the window and
//! the induction-head probe to its report.

use std::path::PathBuf;

use super::Outcome;
use super::common::{LazyBar, emit};
use orthoformer::infer::eval::InductionOptions;
use orthoformer::infer::eval_job::{self, EvalJob};
use orthoformer::nn::qmatvec::MatvecInput;
use orthoformer::train::checkpoint;
use orthoformer::train::checkpoint::probes::Probes;

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
    /// per token and head (q8, q4; q8-gN, q4-gN for groups of N values) [default: f32].
    /// Refused with --checkpoint (its GPT has no KV cache), even when f32.
    #[arg(long, value_parser = super::generate::parse_kv_cache)]
    pub kv_cache: Option<orthoformer::model::llama::KvDtype>,
    /// Model mode: what the products multiply quantised weights with: the f32 activations
    /// (exact), or the activations rounded to 8 bits per 32 for integer dot products in every
    /// product (q8-all: the perplexity of `generate --dot q8`'s decode steps) [default: f32].
    /// q8 (decode steps only) is refused here, as is --dot with --checkpoint.
    #[arg(long, value_parser = super::common::library_values(&MatvecInput::NAMES, str::parse::<MatvecInput>))]
    pub dot: Option<MatvecInput>,
    /// Model mode: activation quantisation and R3.
    #[command(flatten)]
    pub quant: super::quantize_flags::RuntimeQuantArgs,
    /// Checkpoint mode: also report the mean loss at each position of the window, and over
    /// positions 1, 2-3, 4-7, ... (nats/token).
    #[arg(long)]
    pub by_position: bool,
    /// Checkpoint mode: also run the induction-head probe: random token sequences, each
    /// repeated once in the window; reports the loss on the first and on the second copy and
    /// their difference, with 95% t intervals over the sequences.
    #[arg(long)]
    pub induction: bool,
    /// Tokens per copy of the induction probe, 2 to half the context [default: half the
    /// context].
    #[arg(long, requires = "induction")]
    pub induction_len: Option<usize>,
    /// Sequences of the induction probe [default: 64].
    #[arg(long, requires = "induction")]
    pub induction_sequences: Option<usize>,
    /// Seed of the induction probe's sequences [default: 0].
    #[arg(long, requires = "induction")]
    pub seed: Option<u64>,
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
            kv_cache: self
                .kv_cache
                .unwrap_or(orthoformer::model::llama::KvDtype::F32),
            runtime: self.quant.runtime()?,
            dot: self.dot.unwrap_or_default(),
        })
    }

    /// The probes these flags ask for, beside the evaluation.
    pub fn probes(&self) -> Probes {
        let defaults = InductionOptions::default();
        Probes {
            by_position: self.by_position,
            induction: self.induction.then(|| InductionOptions {
                len: self.induction_len,
                sequences: self.induction_sequences.unwrap_or(defaults.sequences),
                seed: self.seed.unwrap_or(defaults.seed),
                ..defaults
            }),
        }
    }
}

/// Runs `orthoformer eval`.
pub fn run(args: &EvalArgs) -> anyhow::Result<Outcome> {
    let job = args.job()?;
    let mut bar = LazyBar::new("eval", args.json);
    let mut progress = |done: usize, total: usize| bar.set(done, total);
    if let Some(path) = &args.model {
        if args.by_position || args.induction {
            anyhow::bail!("--by-position and --induction apply to --checkpoint only");
        }
        let report = eval_job::run_pretrained(path, &job, &mut progress);
        bar.finish();
        emit(&report?, args.json)?;
    } else if let Some(dir) = &args.checkpoint {
        if args.quant.any() || args.kv_cache.is_some() || args.dot.is_some() {
            anyhow::bail!(
                "--abits, --act-clip, --act-asym, --qk-hadamard, --kv-cache and --dot apply to \
                 --model only"
            );
        }
        let report = checkpoint::probes::run(dir, &job, &args.probes(), &mut progress);
        bar.finish();
        emit(&report?, args.json)?;
    } else {
        anyhow::bail!("pass --checkpoint DIR or --model FILE");
    }
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::{Cli, Command};

    fn probes(args: &[&str]) -> Probes {
        let argv = ["orthoformer", "eval", "--checkpoint", "c"];
        let Command::Eval(a) = Cli::try_parse_from(argv.iter().chain(args))
            .unwrap()
            .command
        else {
            panic!("not eval")
        };
        a.probes()
    }

    /// No probe flag runs none; `--induction` alone is the library's default probe.
    #[test]
    fn probe_flags_default_to_the_library() {
        assert_eq!(probes(&[]), Probes::default());
        let p = probes(&["--induction", "--by-position"]);
        assert!(p.by_position);
        assert_eq!(p.induction, Some(InductionOptions::default()));
        let p = probes(&["--induction", "--induction-len", "5", "--seed", "9"]);
        let o = p.induction.unwrap();
        assert_eq!((o.len, o.seed, o.sequences), (Some(5), 9, 64));
    }
}
