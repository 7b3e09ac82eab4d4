//! `orthoformer generate`: sample text from a trained checkpoint (`--checkpoint DIR`) or a
//! pretrained Llama-style model (`--model FILE`), streamed to stdout and reproducible by seed.
//! The flags become the library's one [`GenerateJob`], run by [`generate_job::run`] (prompt,
//! empty-prompt and stop rules, checks, the same for both model families); `--json` prints
//! the text with the prompt and decode speeds instead of streaming.

use std::path::PathBuf;

use super::Outcome;
use crate::output::{StdoutError, out, outln};
use std::sync::atomic::AtomicBool;

use orthoformer::infer::generate::{GenerateReport, SampleOptions};
use orthoformer::infer::generate_batch::{self, BatchJob};
use orthoformer::infer::generate_job::{self, GenerateJob};
use orthoformer::infer::{CausalLm, TextModel};
use orthoformer::model::llama::KvDtype;
use orthoformer::nn::qmatvec::MatvecInput;
use orthoformer::train::checkpoint::load_text_model;

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
    /// The text to continue; empty starts from the model's beginning-of-sequence token (id 0
    /// for a checkpoint). Given more than once, each prompt is its own sequence and the
    /// sequences decode together in one batch (their texts printed when all are done).
    #[arg(long)]
    pub prompt: Vec<String>,
    /// Sequences per prompt, decoded together in one batch; sequence i samples with seed
    /// `--seed` + i, so with the default integer products it makes the text a single
    /// generation with that seed makes [at most 1024 sequences in all].
    #[arg(long, default_value_t = 1)]
    pub parallel: usize,
    /// How many tokens to generate: at most 1048576 (2^20, the library's cap); with --model,
    /// prompt and continuation together at most the model's context.
    #[arg(long, default_value_t = SampleOptions::default().max_new_tokens)]
    pub max_new_tokens: usize,
    /// Sampling temperature; 0 means greedy (always the most likely token).
    #[arg(long, default_value_t = SampleOptions::default().temperature)]
    pub temperature: f32,
    /// Sample only among the `k` most likely tokens (0: all).
    #[arg(long, default_value_t = SampleOptions::default().top_k)]
    pub top_k: usize,
    /// Sample only among the most likely tokens whose probabilities add up to `p` (1: all).
    #[arg(long, default_value_t = SampleOptions::default().top_p)]
    pub top_p: f64,
    /// Seed of the sampler.
    #[arg(long, default_value_t = SampleOptions::default().seed)]
    pub seed: u64,
    /// Print one JSON object (text, token counts, prompt and decode tokens/s) instead of
    /// streaming the text.
    #[arg(long)]
    pub json: bool,
    /// With --model: how the KV cache stores keys and values, f16 (llama.cpp's default: half
    /// the bytes a decode step reads, each key and value rounded to f16), f32 (exact), or 8/4-bit
    /// codes per token and head (q8, q4; q8-gN, q4-gN for groups of N values) [default: f16].
    /// Refused with --checkpoint (its GPT has no KV cache).
    #[arg(long, value_parser = parse_kv_cache)]
    pub kv_cache: Option<KvDtype>,
    /// With --model: what decode multiplies Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K weights
    /// with: the activations rounded to 8 bits per 32 for integer dot products (q8: llama.cpp's
    /// way: 1.3-2.3x the f32 decode on the CPUs measured, perplexity within 0.5% of exact), the f32 activations (f32:
    /// exact logits of the dequantised weights), or q8 in the prompt's products too (q8-all)
    /// [default: q8]. Refused with --checkpoint (its GPT has no quantised weights).
    #[arg(long, value_parser = super::common::library_values(&MatvecInput::NAMES, str::parse::<MatvecInput>))]
    pub dot: Option<MatvecInput>,
    /// With --model: activation quantisation and R3.
    #[command(flatten)]
    pub quant: super::quantize_flags::RuntimeQuantArgs,
}

/// `--kv-cache`'s parser (clap reports its error as a usage error, exit 2).
pub fn parse_kv_cache(s: &str) -> Result<KvDtype, String> {
    KvDtype::parse(s).map_err(|e| crate::flags::with_flags(&e))
}

impl GenerateArgs {
    /// Whether the flags ask for a batch (several prompts or `--parallel` above 1).
    pub fn is_batch(&self) -> bool {
        self.prompt.len() > 1 || self.parallel != 1
    }

    /// The library's batch these flags ask for.
    pub fn batch_job(&self) -> BatchJob {
        let one = self.job();
        BatchJob {
            prompts: if self.prompt.is_empty() {
                vec![String::new()]
            } else {
                self.prompt.clone()
            },
            parallel: self.parallel,
            options: one.options,
            kv_cache: one.kv_cache,
            dot: one.dot,
        }
    }

    /// The library's job these flags ask for (one sequence: the first prompt).
    pub fn job(&self) -> GenerateJob {
        GenerateJob {
            prompt: self.prompt.first().cloned().unwrap_or_default(),
            options: SampleOptions {
                max_new_tokens: self.max_new_tokens,
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                seed: self.seed,
            },
            kv_cache: self.kv_cache,
            dot: self.dot,
        }
    }
}

/// Runs `orthoformer generate`.
pub fn run(args: &GenerateArgs) -> anyhow::Result<Outcome> {
    if args.is_batch() {
        return run_batch(args);
    }
    let report = match (&args.model, &args.checkpoint) {
        (Some(path), _) => {
            let runtime = args.quant.runtime()?;
            let job = args.job();
            generate(args, || {
                TextModel::pretrained(path, job.kv_cache())?
                    .with_dot(job.dot())
                    .with_runtime(&runtime)
            })?
        }
        (None, Some(dir)) => {
            if args.quant.any() {
                anyhow::bail!(
                    "--abits, --act-clip, --act-asym and --qk-hadamard apply to --model only"
                );
            }
            args.job().check_checkpoint()?;
            generate(args, || load_text_model(dir))?
        }
        (None, None) => anyhow::bail!("pass --checkpoint DIR or --model FILE"),
    };
    if args.json {
        super::common::print_json(&report)?;
    }
    Ok(Outcome::Success)
}

/// `orthoformer generate` with several sequences: one batch, printed when it is done (each
/// sequence's prompt and text under a header), with the count of tokens made on stderr
/// while it runs.
fn run_batch(args: &GenerateArgs) -> anyhow::Result<Outcome> {
    let job = args.batch_job();
    job.validate()?;
    let never = AtomicBool::new(false);
    let total = job.sequences().saturating_mul(job.options.max_new_tokens);
    let bar = super::common::progress_bar(total as u64, "generate", args.json);
    let mut on_step = |made: usize| {
        bar.set_position(made as u64);
        Ok(())
    };
    let report = match (&args.model, &args.checkpoint) {
        (Some(path), _) => {
            let runtime = args.quant.runtime()?;
            let open = || {
                TextModel::pretrained(path, job.sequence(0).kv_cache())?
                    .with_dot(job.sequence(0).dot())
                    .with_runtime(&runtime)
            };
            generate_batch::run(&job, open, &never, &mut on_step)?
        }
        (None, Some(dir)) => {
            if args.quant.any() {
                anyhow::bail!(
                    "--abits, --act-clip, --act-asym and --qk-hadamard apply to --model only"
                );
            }
            job.check_checkpoint()?;
            generate_batch::run(&job, || load_text_model(dir), &never, &mut on_step)?
        }
        (None, None) => anyhow::bail!("pass --checkpoint DIR or --model FILE"),
    };
    bar.finish_and_clear();
    if args.json {
        super::common::print_json(&report)?;
        return Ok(Outcome::Success);
    }
    for (i, s) in report.sequences.iter().enumerate() {
        outln!("--- sequence {i} (seed {}) ---", s.seed)?;
        outln!("{}{}", s.prompt, s.text)?;
    }
    Ok(Outcome::Success)
}

/// The library's generation of the flags' job with the model `open` gives, streaming the
/// prompt and the text to stdout (unless `--json`).
fn generate<M: CausalLm>(
    args: &GenerateArgs,
    open: impl FnOnce() -> orthoformer::Result<TextModel<M>>,
) -> anyhow::Result<GenerateReport> {
    let job = args.job();
    if args.json {
        return Ok(generate_job::run(&job, open, None)?);
    }
    // The library sees a failed write as its own error; the write's reason is kept here so
    // `main` still tells a closed pipe (exit 0) from a full device (exit 2).
    let mut failed: Option<StdoutError> = None;
    let mut print = |piece: &str| {
        out!("{piece}")
            .and_then(|_| crate::output::flush())
            .map_err(|e| {
                let lib = orthoformer::Error::io(
                    "stdout",
                    std::io::Error::new(e.0.kind(), e.0.to_string()),
                );
                failed = Some(e);
                lib
            })
    };
    let report = generate_job::run(&job, open, Some(&mut print));
    if let Some(e) = failed {
        return Err(e.into());
    }
    let report = report?;
    outln!()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::Cli;

    /// The help states the library's cap and the pretrained defaults that `Option` flags
    /// cannot show by themselves.
    #[test]
    fn help_states_the_library_values() {
        let help = Cli::command()
            .find_subcommand_mut("generate")
            .unwrap()
            .render_long_help()
            .to_string();
        let cap = orthoformer::infer::generate::MAX_NEW_TOKENS;
        assert!(help.contains(&format!("at most {cap}")), "{help}");
        for shown in [
            GenerateJob::DEFAULT_KV_CACHE.to_string(),
            GenerateJob::DEFAULT_DOT.to_string(),
        ] {
            assert!(help.contains(&format!("[default: {shown}]")), "{help}");
        }
    }
}
