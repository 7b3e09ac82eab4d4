//! `orthoformer bench`: one training step (forward, backward, AdamW) of the same GPT in
//! Orthoformer and in PyTorch (`scripts/torch_gpt_bench.py`, run as a subprocess) in one run,
//! for config A and config B with softmax and frozen orthogonal attention, plus the f32 GEMM
//! peak measured in the same run. PyTorch's reference is pre-LN with bias-free attention
//! projections; the presets `config-a` and `config-b` are the same model.

use std::path::PathBuf;
use std::process::Command;

use super::Outcome;
use super::common::{PYTHON, comma_default, emit};
use orthoformer::bench::options::{BenchOptions, BenchShape};
use orthoformer::bench::step::{ReferenceStep, run_step_bench};
use orthoformer::model::GptConfig;
use orthoformer::nn::qmatvec::MatvecInput;

/// Flags of `orthoformer bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Configurations: a (context 128, batch 16, 4 layers, d 128) and/or b (context 256,
    /// batch 8, 6 layers, d 384).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = comma_default!(BenchOptions::default().configs.iter().map(|c| c.name()))
    )]
    pub configs: Vec<String>,
    /// Attention variants to time (any of softmax, orthogonal, orthogonal-tied, identity-q,
    /// orthogonal-hadamard, orthogonal-trained, linear, orthogonal-linear; PyTorch runs the
    /// frozen ones as its frozen dense model and has no linear attention).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = comma_default!(BenchOptions::default().attention.iter().map(|a| a.name()))
    )]
    pub attention: Vec<String>,
    /// Timed steps per measurement (after 3 warm-up steps); the median is reported.
    #[arg(long, default_value_t = BenchOptions::default().steps)]
    pub steps: usize,
    /// Rounds: each round measures the GEMM peak, then Orthoformer and PyTorch back to back
    /// for every row; the best round of each is reported, so a burst of load from another
    /// process on a shared machine disturbs neither side's figure.
    #[arg(long, default_value_t = BenchOptions::default().rounds)]
    pub rounds: usize,
    /// Threads for both (rayon here, `torch.set_num_threads` there), at most the machine's
    /// cores [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// The PyTorch reference script.
    #[arg(long, default_value = "scripts/torch_gpt_bench.py")]
    pub torch_script: PathBuf,
    /// Python interpreter with torch.
    #[arg(long, default_value = PYTHON)]
    pub python: String,
    /// Time Orthoformer only.
    #[arg(long)]
    pub no_torch: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Time a pretrained Llama model (GGUF file or Hugging Face folder; several separated by
    /// commas) instead of GPT training: prefill, greedy decode and eval windows, beside
    /// llama.cpp and PyTorch in the same run (see `bench_llama.rs`).
    #[arg(long, value_delimiter = ',')]
    pub model: Vec<PathBuf>,
    /// With --model: prompt tokens prefilled as one chunk.
    #[arg(long, default_value_t = BenchOptions::default().prompt_tokens)]
    pub prompt_tokens: usize,
    /// With --model: greedy tokens generated after the prompt.
    #[arg(long, default_value_t = BenchOptions::default().gen_tokens)]
    pub gen_tokens: usize,
    /// With --model: tokens scored by the eval windows (256 wide, stride 128); 0 skips eval.
    #[arg(long, default_value_t = BenchOptions::default().eval_tokens)]
    pub eval_tokens: usize,
    /// With --model: the fallback llama.cpp script (the PyPI wheel), used when no native
    /// build of `scripts/build_llamacpp.sh` is in the cache.
    #[arg(long, default_value = "scripts/bench_llamacpp.py")]
    pub llamacpp_script: PathBuf,
    /// With --model: the PyTorch Llama eval script.
    #[arg(long, default_value = "scripts/bench_llama_torch.py")]
    pub llama_torch_script: PathBuf,
    /// With --model: batch sizes (comma-separated, 1 to 256) to time batch decoding at
    /// instead: that many sequences, each reading its own --prompt-tokens prompt, then
    /// decoding --gen-tokens tokens together, beside llama.cpp's `llama-batched-bench`.
    #[arg(long, value_delimiter = ',')]
    pub batch: Vec<usize>,
    /// With --model: skip llama.cpp.
    #[arg(long)]
    pub no_llamacpp: bool,
    /// With --model: print the ratios even when other processes kept the cores busy during
    /// the run or our rounds were unsteady (they are marked `!`); without it such ratios are
    /// withheld and the report says why.
    #[arg(long)]
    pub allow_busy: bool,
    /// With --model: how our KV cache stores keys and values, f16 (llama.cpp's default, which
    /// its side uses too) or f32.
    #[arg(long, default_value_t = BenchOptions::default().kv_cache, value_parser = super::generate::parse_kv_cache)]
    pub kv_cache: orthoformer::model::llama::KvDtype,
    /// With --model: what our decode multiplies Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K
    /// weights with: activations rounded to 8 bits per 32 for integer dot products (q8, what
    /// llama.cpp's side does, and `generate`'s default), the f32 activations (exact), or q8 in
    /// the prefill's products too (q8-all).
    #[arg(long, default_value_t = BenchOptions::default().dot, value_parser = super::common::library_values(&MatvecInput::NAMES, str::parse::<MatvecInput>))]
    pub dot: MatvecInput,
}

impl BenchArgs {
    /// The library's options these flags ask for (names checked).
    pub fn options(&self) -> anyhow::Result<BenchOptions> {
        Ok(BenchOptions {
            configs: self
                .configs
                .iter()
                .map(|c| BenchShape::parse(c, false))
                .collect::<Result<_, _>>()?,
            attention: self
                .attention
                .iter()
                .map(|a| super::train::parse_attention(a))
                .collect::<anyhow::Result<_>>()?,
            steps: self.steps,
            rounds: self.rounds,
            threads: self.threads,
            prompt_tokens: self.prompt_tokens,
            gen_tokens: self.gen_tokens,
            eval_tokens: self.eval_tokens,
            kv_cache: self.kv_cache,
            dot: self.dot,
        })
    }
}

/// Runs `orthoformer bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<Outcome> {
    let opts = args.options()?;
    if !args.model.is_empty() {
        return super::bench_llama::run(args, &opts);
    }
    opts.validate_steps()?;
    let threads = opts.setup_threads()?;
    let rows = opts.configs.len() * opts.attention.len();
    let total = (opts.rounds() * (rows + 1)) as u64;
    let bar = super::common::progress_bar(total, "bench", args.json);
    let mut torch = |cfg: &GptConfig, b: usize| {
        run_torch(args, cfg, b, opts.steps, threads).map_err(|e| e.to_string())
    };
    let reference: Option<&mut orthoformer::bench::step::ReferenceTimer<'_>> = if args.no_torch {
        None
    } else {
        Some(&mut torch)
    };
    let report = run_step_bench(&opts, threads, reference, &mut || bar.inc(1))?;
    bar.finish_and_clear();
    emit(&report, args.json)?;
    Ok(Outcome::Success)
}

/// Runs the PyTorch reference on the same shape: its median ms per step and tokens/s.
fn run_torch(
    args: &BenchArgs,
    cfg: &GptConfig,
    b: usize,
    steps: usize,
    threads: usize,
) -> anyhow::Result<ReferenceStep> {
    // PyTorch's reference has softmax attention with trainable or frozen dense Q/K: the
    // frozen variants (tied, identity, Hadamard) are compared with its frozen dense model,
    // the best PyTorch offers without a custom kernel.
    if cfg.attention.is_linear() {
        anyhow::bail!("the PyTorch reference has softmax attention only");
    }
    let frozen = cfg.attention.frozen_qk();
    let mut cmd = Command::new(&args.python);
    cmd.arg(&args.torch_script)
        .args(["--layers", &cfg.n_layer.to_string()])
        .args(["--d", &cfg.d_model.to_string()])
        .args(["--heads", &cfg.n_head.to_string()])
        .args(["--block", &cfg.context.to_string()])
        .args(["--batch", &b.to_string()])
        .args(["--vocab", &cfg.vocab_size.to_string()])
        .args(["--steps", &steps.to_string()])
        .args(["--threads", &threads.to_string()]);
    if frozen {
        cmd.arg("--frozen-qk");
    }
    let out = cmd.output().map_err(|e| {
        anyhow::anyhow!(
            "cannot run {} {}: {e}",
            args.python,
            args.torch_script.display()
        )
    })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").to_string();
        anyhow::bail!("{} failed: {last}", args.torch_script.display());
    }
    let field = |key: &str| -> Option<f64> {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
    };
    match (field("median_ms="), field("tokens_per_s=")) {
        (Some(ms_per_step), Some(tokens_per_s)) => Ok(ReferenceStep {
            ms_per_step,
            tokens_per_s,
        }),
        _ => anyhow::bail!(
            "unexpected output from {}: {text}",
            args.torch_script.display()
        ),
    }
}
