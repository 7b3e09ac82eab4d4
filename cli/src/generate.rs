//! `orthoformer generate`: sample text from a trained checkpoint (`--checkpoint DIR`) or a
//! pretrained Llama-style model (`--model FILE`), streamed to stdout and reproducible by seed.
//! Both run the library's one `generate_ids` over the `CausalLm` interface; `--json` prints
//! the text with the prompt and decode speeds instead of streaming.

use std::path::PathBuf;

use anyhow::Context;

use super::Outcome;
use crate::output::{StdoutError, out, outln};
use orthoformer::infer::CausalLm;
use orthoformer::infer::generate::{GenerateReport, SampleOptions, generate_text};
use orthoformer::model::llama::tokenizer::{decode, encode, stop_ids};
use orthoformer::model::llama::{KvDtype, load_engine};
use orthoformer::train::checkpoint;

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
    #[arg(long, default_value_t)]
    pub prompt: String,
    /// How many tokens to generate.
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
    /// codes per token and head (q8, q4; q8-gN, q4-gN for groups of N values).
    #[arg(long, default_value = "f16", value_parser = parse_kv_cache)]
    pub kv_cache: KvDtype,
    /// With --model: activation quantisation and R3.
    #[command(flatten)]
    pub quant: super::quantize_flags::RuntimeQuantArgs,
}

/// `--kv-cache`'s parser (clap reports its error as a usage error, exit 2).
pub fn parse_kv_cache(s: &str) -> Result<KvDtype, String> {
    KvDtype::parse(s)
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
    let report = if let Some(path) = args.model.as_deref() {
        let loaded = load_engine(path).context("loading the model")?;
        let (tok, mut model) = (loaded.tokenizer, loaded.model);
        model.kv_dtype = args.kv_cache;
        args.quant.apply(&mut model)?;
        // The model's own end-of-sequence id (GGUF or config metadata), and the usual
        // end-of-turn tokens its vocabulary has.
        let mut stop = stop_ids(&tok);
        stop.extend(loaded.special.eos.filter(|e| !stop.contains(e)));
        let prompt = encode(&tok, &args.prompt)?;
        if prompt.is_empty() {
            anyhow::bail!("the prompt is empty: pass --prompt TEXT");
        }
        let max = model.context();
        if prompt.len().saturating_add(args.max_new_tokens) > max {
            anyhow::bail!(
                "prompt ({} tokens) + --max-new-tokens {} exceed the model's context of {max}",
                prompt.len(),
                args.max_new_tokens
            );
        }
        let cap = prompt.len() + args.max_new_tokens;
        super::pretrained::check_cache_fits(model.config(), cap)?;
        let detok = |ids: &[u32]| decode(&tok, ids);
        stream(&mut model, args, &prompt, &stop, &detok)?
    } else {
        let Some(dir) = args.checkpoint.as_deref() else {
            anyhow::bail!("pass --checkpoint DIR (a folder written by `orthoformer train`)");
        };
        if args.quant.any() {
            anyhow::bail!(
                "--abits, --act-clip, --act-asym and --qk-hadamard apply to --model only"
            );
        }
        // One read of the model, verified against the manifest and the state's configuration.
        let (loaded, mut model) = checkpoint::load_with_model(dir)?;
        let mut prompt = loaded.tokenizer.encode(&args.prompt)?;
        if prompt.is_empty() {
            // An empty prompt starts from token 0 (a newline for character-level Shakespeare).
            prompt.push(0);
        }
        let detok = |ids: &[u32]| loaded.tokenizer.decode(ids);
        stream(&mut model, args, &prompt, &[], &detok)?
    };
    if args.json {
        super::common::print_json(&report)?;
    }
    Ok(Outcome::Success)
}

/// Generates after `prompt` with `model`, streaming the text to stdout (unless `--json`).
fn stream<M: CausalLm>(
    model: &mut M,
    args: &GenerateArgs,
    prompt: &[u32],
    stop: &[u32],
    detok: &dyn Fn(&[u32]) -> orthoformer::Result<String>,
) -> anyhow::Result<GenerateReport> {
    let opts = args.sample_options();
    if args.json {
        return generate_text(model, &args.prompt, prompt, opts, stop, detok, None)
            .context("generating");
    }
    out!("{}", args.prompt)?;
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
    let report = generate_text(
        model,
        &args.prompt,
        prompt,
        opts,
        stop,
        detok,
        Some(&mut print),
    );
    if let Some(e) = failed {
        return Err(e.into());
    }
    let report = report.context("generating")?;
    outln!()?;
    Ok(report)
}
