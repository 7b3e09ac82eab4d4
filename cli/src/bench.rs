//! `orthoformer bench`: one training step (forward, backward, AdamW) of the same GPT in
//! Orthoformer and in PyTorch (`scripts/torch_gpt_bench.py`, run as a subprocess) in one run,
//! for config A and config B with softmax and frozen orthogonal attention, plus the f32 GEMM
//! peak measured in the same run. PyTorch's reference is pre-LN with bias-free attention
//! projections; the presets `config-a` and `config-b` are the same model.

use std::path::PathBuf;
use std::process::Command;

use super::Outcome;
use orthoformer::model::GptConfig;
use orthoformer::train::compare::attention_name;
use orthoformer::train::step_bench::{StepTiming, gemm_peak, time_training_step};

/// Flags of `orthoformer bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Configurations: a (context 128, batch 16, 4 layers, d 128) and/or b (context 256,
    /// batch 8, 6 layers, d 384).
    #[arg(long, value_delimiter = ',', default_value = "a,b")]
    pub configs: Vec<String>,
    /// Attention variants to time (any of softmax, orthogonal, orthogonal-tied, identity-q,
    /// orthogonal-hadamard, linear, orthogonal-linear; PyTorch runs the frozen ones as its
    /// frozen dense model and has no linear attention).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "softmax,orthogonal,orthogonal-hadamard"
    )]
    pub attention: Vec<String>,
    /// Timed steps per measurement (after 3 warm-up steps); the median is reported.
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    /// Rounds: each round measures the GEMM peak, then Orthoformer and PyTorch back to back
    /// for every row; the best round of each is reported, so a burst of load from another
    /// process on a shared machine disturbs neither side's figure.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Threads for both (rayon here, `torch.set_num_threads` there) [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// The PyTorch reference script.
    #[arg(long, default_value = "scripts/torch_gpt_bench.py")]
    pub torch_script: PathBuf,
    /// Python interpreter with torch.
    #[arg(long, default_value = "python3")]
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
    #[arg(long, default_value_t = 256)]
    pub prompt_tokens: usize,
    /// With --model: greedy tokens generated after the prompt.
    #[arg(long, default_value_t = 128)]
    pub gen_tokens: usize,
    /// With --model: tokens scored by the eval windows (256 wide, stride 128); 0 skips eval.
    #[arg(long, default_value_t = 1024)]
    pub eval_tokens: usize,
    /// With --model: the llama.cpp script.
    #[arg(long, default_value = "scripts/bench_llamacpp.py")]
    pub llamacpp_script: PathBuf,
    /// With --model: the PyTorch Llama eval script.
    #[arg(long, default_value = "scripts/bench_llama_torch.py")]
    pub llama_torch_script: PathBuf,
    /// With --model: skip llama.cpp.
    #[arg(long)]
    pub no_llamacpp: bool,
}

#[derive(Debug, serde::Serialize)]
struct Row {
    config: String,
    attention: String,
    batch: usize,
    context: usize,
    orthoformer: StepTiming,
    gemm_peak_share: f64,
    torch_ms_per_step: Option<f64>,
    torch_tokens_per_s: Option<f64>,
    /// torch ms / orthoformer ms: above 1 means Orthoformer is faster.
    speedup_vs_torch: Option<f64>,
    /// PyTorch's rate on the same counted FLOPs.
    torch_gflops: Option<f64>,
    torch_error: Option<String>,
    /// Orthoformer's median ms per step in each round (the row reports the best).
    orthoformer_ms_rounds: Vec<f64>,
    /// PyTorch's median ms per step in each round that ran.
    torch_ms_rounds: Vec<f64>,
}

/// Runs `orthoformer bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<Outcome> {
    if !args.model.is_empty() {
        return super::bench_llama::run(args);
    }
    if args.steps == 0 {
        anyhow::bail!("--steps must be at least 1");
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // A global pool of `threads` workers: the model's kernels and gemm run on it.
    orthoformer::nn::threads::set_global_threads(threads);
    let mut plan = Vec::new();
    for c in &args.configs {
        let (label, preset, b) = super::common::bench_shape(c, false)?;
        let cfg = GptConfig::preset(preset)?;
        for a in &args.attention {
            let mut cfg = cfg.clone();
            cfg.attention = super::train::parse_attention(a)?;
            plan.push((label.clone(), cfg, b));
        }
    }
    let rounds = args.rounds.max(1);
    let total = (rounds * (plan.len() + 1)) as u64;
    let bar = super::common::progress_bar(total, "bench", args.json);
    let mut peaks = Vec::new();
    let mut best: Vec<Option<(StepTiming, TorchTiming)>> = plan.iter().map(|_| None).collect();
    // Every round's figures, kept so the spread (outside load) can be seen.
    let mut history: Vec<(Vec<f64>, Vec<f64>)> = plan.iter().map(|_| Default::default()).collect();
    for _ in 0..rounds {
        peaks.push(gemm_peak(1024, threads, 10));
        bar.inc(1);
        for (((_, cfg, b), slot), hist) in plan.iter().zip(best.iter_mut()).zip(&mut history) {
            let ours = time_training_step(cfg, *b, args.steps, 0)?;
            let torch = if args.no_torch {
                Err(anyhow::anyhow!("skipped (--no-torch)"))
            } else {
                run_torch(args, cfg, *b, threads)
            };
            hist.0.push(ours.ms_per_step);
            if let Ok((ms, _)) = &torch {
                hist.1.push(*ms);
            }
            *slot = Some(match slot.take() {
                None => (ours, torch),
                Some((o, t)) => {
                    let o = if ours.ms_per_step < o.ms_per_step {
                        ours
                    } else {
                        o
                    };
                    let t = match (t, torch) {
                        (Ok(x), Ok(y)) => Ok(if y.0 < x.0 { y } else { x }),
                        (Ok(x), Err(_)) | (Err(_), Ok(x)) => Ok(x),
                        (Err(e), Err(_)) => Err(e),
                    };
                    (o, t)
                }
            });
            bar.inc(1);
        }
    }
    let peak = peaks.iter().copied().fold(0.0f64, f64::max);
    let mut rows = Vec::new();
    for (((name, cfg, b), slot), (ours_rounds, torch_rounds)) in
        plan.into_iter().zip(best).zip(history)
    {
        let Some((ours, torch)) = slot else { continue };
        let (tm, tt, te) = match torch {
            Ok((ms, tps)) => (Some(ms), Some(tps), None),
            Err(_) if args.no_torch => (None, None, None),
            Err(e) => (None, None, Some(e.to_string())),
        };
        rows.push(Row {
            config: name,
            attention: attention_name(cfg.attention),
            batch: b,
            context: cfg.context,
            gemm_peak_share: ours.gflops / peak,
            speedup_vs_torch: tm.map(|t| t / ours.ms_per_step),
            torch_gflops: tm.map(|t| ours.flops_per_step / (t / 1e3) / 1e9),
            orthoformer: ours,
            torch_ms_per_step: tm,
            torch_tokens_per_s: tt,
            torch_error: te,
            orthoformer_ms_rounds: ours_rounds,
            torch_ms_rounds: torch_rounds,
        });
    }
    bar.finish_and_clear();
    if args.json {
        super::common::print_json(&serde_json::json!({
            "threads": threads,
            "gemm_peak_gflops": peak,
            "gemm_peak_rounds": peaks,
            "rows": rows,
        }))?;
        return Ok(Outcome::Success);
    }
    println!(
        "f32 GEMM peak (1024^3, {threads} threads, best of {rounds} rounds): {peak:.1} GFLOP/s"
    );
    if rounds > 1 {
        let each: Vec<String> = peaks.iter().map(|p| format!("{p:.1}")).collect();
        println!(
            "  per round: {} (a low reading means other load; each side's best round is shown, \
             every round is in --json)",
            each.join(", ")
        );
    }
    println!(
        "{:<3} {:<20} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>8} {:>7}",
        "cfg",
        "attention",
        "ours ms",
        "tok/s",
        "torch ms",
        "tok/s",
        "speedup",
        "GFLOP/s",
        "% peak",
        "torch GF",
        "% peak"
    );
    for r in &rows {
        let opt = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |v| format!("{v:.p$}"));
        println!(
            "{:<3} {:<20} {:>9.2} {:>9.0} {:>9} {:>9} {:>8} {:>8.1} {:>6.1}% {:>8} {:>7}",
            r.config,
            r.attention,
            r.orthoformer.ms_per_step,
            r.orthoformer.tokens_per_s,
            opt(r.torch_ms_per_step, 2),
            opt(r.torch_tokens_per_s, 0),
            r.speedup_vs_torch
                .map_or("-".into(), |s| format!("{s:.2}x")),
            r.orthoformer.gflops,
            100.0 * r.gemm_peak_share,
            opt(r.torch_gflops, 1),
            r.torch_gflops
                .map_or("-".into(), |g| format!("{:.1}%", 100.0 * g / peak)),
        );
        if let Some(e) = &r.torch_error {
            println!("    torch: {e}");
        }
    }
    Ok(Outcome::Success)
}

/// PyTorch's (median ms, tokens/s), or why there is none.
type TorchTiming = anyhow::Result<(f64, f64)>;

/// Runs the PyTorch reference on the same shape; returns (median ms, tokens/s).
fn run_torch(
    args: &BenchArgs,
    cfg: &GptConfig,
    b: usize,
    threads: usize,
) -> anyhow::Result<(f64, f64)> {
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
        .args(["--steps", &args.steps.to_string()])
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
        (Some(ms), Some(tps)) => Ok((ms, tps)),
        _ => anyhow::bail!(
            "unexpected output from {}: {text}",
            args.torch_script.display()
        ),
    }
}
