//! `orthoformer bench`: one training step (forward, backward, AdamW) of the same GPT in
//! Orthoformer and in PyTorch (`scripts/torch_gpt_bench.py`, run as a subprocess) in one run,
//! for config A and config B with softmax and frozen orthogonal attention, plus the f32 GEMM
//! peak measured in the same run. PyTorch's reference is pre-LN with bias-free attention
//! projections; the presets `config-a` and `config-b` are the same model.

use std::path::PathBuf;
use std::process::Command;

use super::Outcome;
use crate::model::{AttentionKind, GptConfig};
use crate::train::compare::attention_name;
use crate::train::step_bench::{StepTiming, gemm_peak, time_training_step};

/// Flags of `orthoformer bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Configurations: a (context 128, batch 16, 4 layers, d 128) and/or b (context 256,
    /// batch 8, 6 layers, d 384).
    #[arg(long, value_delimiter = ',', default_value = "a,b")]
    pub configs: Vec<String>,
    /// Attention variants to time.
    #[arg(long, value_delimiter = ',', default_value = "softmax,orthogonal")]
    pub attention: Vec<String>,
    /// Timed steps per measurement (after 3 warm-up steps); the median is reported.
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
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
    torch_error: Option<String>,
}

fn config_for(name: &str) -> anyhow::Result<(GptConfig, usize)> {
    match name.trim() {
        "a" | "A" => Ok((GptConfig::preset("config-a")?, 16)),
        "b" | "B" => Ok((GptConfig::preset("config-b")?, 8)),
        other => anyhow::bail!("unknown benchmark config {other:?}: use a or b"),
    }
}

/// Runs `orthoformer bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<Outcome> {
    if args.steps == 0 {
        anyhow::bail!("--steps must be at least 1");
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // A global pool of `threads` workers: the model's kernels and gemm run on it.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
    let mut plan = Vec::new();
    for c in &args.configs {
        let (cfg, b) = config_for(c)?;
        for a in &args.attention {
            let mut cfg = cfg.clone();
            cfg.attention = super::train::parse_attention(a)?;
            plan.push((c.trim().to_uppercase(), cfg, b));
        }
    }
    let bar = super::common::progress_bar(plan.len() as u64 + 1, "bench", args.json);
    let peak = gemm_peak(1024, threads, 10);
    bar.inc(1);
    let mut rows = Vec::new();
    for (name, cfg, b) in plan {
        let ours = time_training_step(&cfg, b, args.steps, 0)?;
        let torch = if args.no_torch {
            None
        } else {
            Some(run_torch(args, &cfg, b, threads))
        };
        let (tm, tt, te) = match torch {
            Some(Ok((ms, tps))) => (Some(ms), Some(tps), None),
            Some(Err(e)) => (None, None, Some(e.to_string())),
            None => (None, None, None),
        };
        rows.push(Row {
            config: name,
            attention: attention_name(cfg.attention),
            batch: b,
            context: cfg.context,
            gemm_peak_share: ours.gflops / peak,
            speedup_vs_torch: tm.map(|t| t / ours.ms_per_step),
            orthoformer: ours,
            torch_ms_per_step: tm,
            torch_tokens_per_s: tt,
            torch_error: te,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    if args.json {
        super::common::print_json(&serde_json::json!({
            "threads": threads,
            "gemm_peak_gflops": peak,
            "rows": rows,
        }))?;
        return Ok(Outcome::Success);
    }
    println!("f32 GEMM peak (1024^3, {threads} threads): {peak:.1} GFLOP/s");
    println!(
        "{:<3} {:<12} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>7}",
        "cfg",
        "attention",
        "ours ms",
        "ours tok/s",
        "torch ms",
        "torch tok/s",
        "speedup",
        "GFLOP/s",
        "% peak"
    );
    for r in &rows {
        let opt = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |v| format!("{v:.p$}"));
        println!(
            "{:<3} {:<12} {:>10.2} {:>10.0} {:>10} {:>10} {:>8} {:>8.1} {:>6.1}%",
            r.config,
            r.attention,
            r.orthoformer.ms_per_step,
            r.orthoformer.tokens_per_s,
            opt(r.torch_ms_per_step, 2),
            opt(r.torch_tokens_per_s, 0),
            r.speedup_vs_torch
                .map_or("-".into(), |s| format!("{s:.2}x")),
            r.orthoformer.gflops,
            100.0 * r.gemm_peak_share
        );
        if let Some(e) = &r.torch_error {
            println!("    torch: {e}");
        }
    }
    Ok(Outcome::Success)
}

/// Runs the PyTorch reference on the same shape; returns (median ms, tokens/s).
fn run_torch(
    args: &BenchArgs,
    cfg: &GptConfig,
    b: usize,
    threads: usize,
) -> anyhow::Result<(f64, f64)> {
    let frozen = matches!(cfg.attention, AttentionKind::Orthogonal);
    if !matches!(
        cfg.attention,
        AttentionKind::Softmax | AttentionKind::Orthogonal
    ) {
        anyhow::bail!("the PyTorch reference has softmax attention only");
    }
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
