//! `orthoformer bench --model M[,M2]`: a pretrained Llama model's inference beside its peers,
//! in one run on one machine. Ours: load (weights mapped), prefill of a prompt, greedy decode,
//! eval windows (`train::llama_bench`). llama.cpp: `scripts/bench_llamacpp.py` on the same
//! file and the same prompt ids. PyTorch: `scripts/bench_llama_torch.py`, the eval windows in
//! float32. Each peer that cannot run is reported with the reason, never silently skipped.

use std::path::Path;
use std::process::Command;

use anyhow::Context;
use serde::Serialize;

use super::Outcome;
use super::bench::BenchArgs;
use super::pretrained::read_tokens;
use orthoformer::model::llama::load_engine;
use orthoformer::train::llama_bench::{EvalPlan, LlamaBench, bench_llama};
use orthoformer::train::rss::mib;

/// llama.cpp's figures (`scripts/bench_llamacpp.py`'s JSON).
#[derive(Debug, Serialize, serde::Deserialize)]
struct LlamaCpp {
    prefill_tokens_per_s: f64,
    decode_tokens_per_s: f64,
    first_generated: Vec<u32>,
    system_info: String,
}

#[derive(Debug, Serialize)]
struct Row {
    model: String,
    file_bytes: u64,
    weights_mapped: bool,
    rss_before_load_bytes: Option<u64>,
    ours: LlamaBench,
    llamacpp: Option<LlamaCpp>,
    llamacpp_error: Option<String>,
    torch_eval_tokens_per_s: Option<f64>,
    torch_error: Option<String>,
    /// Ours / llama.cpp (above 1: we are faster).
    prefill_vs_llamacpp: Option<f64>,
    decode_vs_llamacpp: Option<f64>,
    /// Ours / PyTorch on the eval windows.
    eval_vs_torch: Option<f64>,
}

/// Runs the `--model` mode of `orthoformer bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<Outcome> {
    if args.prompt_tokens == 0 || args.gen_tokens == 0 {
        anyhow::bail!("--prompt-tokens and --gen-tokens must be at least 1");
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // A global pool of `threads` workers: the model's kernels and gemm run on it.
    orthoformer::nn::threads::set_global_threads(threads);
    let mut rows = Vec::new();
    for path in &args.model {
        rows.push(bench_one(args, path, threads)?);
    }
    if args.json {
        super::common::print_json(&serde_json::json!({ "threads": threads, "rows": rows }))?;
        return Ok(Outcome::Success);
    }
    for r in &rows {
        print_row(r, threads);
    }
    Ok(Outcome::Success)
}

fn bench_one(args: &BenchArgs, path: &Path, threads: usize) -> anyhow::Result<Row> {
    let rss_before = status_bytes("VmRSS");
    let file_bytes = std::fs::metadata(path).map_or(0, |m| if m.is_file() { m.len() } else { 0 });
    let loaded = load_engine(path).with_context(|| format!("loading {}", path.display()))?;
    let mut model = loaded.model;
    let need = args.prompt_tokens + args.gen_tokens;
    if need > model.context() {
        anyhow::bail!(
            "--prompt-tokens + --gen-tokens = {need} exceed the model's context {}",
            model.context()
        );
    }
    // The embedded TinyShakespeare, so every run (and llama.cpp) sees the same real text.
    let n_text = args.prompt_tokens.max(args.eval_tokens + 1);
    let ids = read_tokens(&loaded.tokenizer, None, n_text)?;
    if ids.len() <= n_text {
        anyhow::bail!(
            "the embedded text has {} tokens, fewer than the {} asked for: use smaller \
             --prompt-tokens or --eval-tokens",
            ids.len(),
            n_text + 1
        );
    }
    let prompt = &ids[..args.prompt_tokens];
    let eval = (args.eval_tokens > 0).then(|| EvalPlan {
        tokens: ids[..=args.eval_tokens].to_vec(),
        context: 256.min(model.context()),
    });
    let mapped = model.weights().embed.is_mapped();
    let ours = bench_llama(
        &mut model,
        prompt,
        args.gen_tokens,
        args.rounds,
        eval.as_ref(),
    )?;
    drop(model);
    let (llamacpp, llamacpp_error) = if args.no_llamacpp {
        (None, Some("skipped (--no-llamacpp)".to_string()))
    } else {
        match run_llamacpp(args, path, prompt, threads) {
            Ok(x) => (Some(x), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        }
    };
    let (torch, torch_error) = if args.no_torch || args.eval_tokens == 0 {
        (None, Some("skipped".to_string()))
    } else {
        match run_torch(args, path, threads) {
            Ok(x) => (Some(x), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        }
    };
    Ok(Row {
        model: path.display().to_string(),
        file_bytes,
        weights_mapped: mapped,
        rss_before_load_bytes: rss_before,
        prefill_vs_llamacpp: llamacpp
            .as_ref()
            .map(|l| ours.prefill_tokens_per_s / l.prefill_tokens_per_s),
        decode_vs_llamacpp: llamacpp
            .as_ref()
            .map(|l| ours.decode_tokens_per_s / l.decode_tokens_per_s),
        eval_vs_torch: torch.zip(ours.eval_tokens_per_s).map(|(t, o)| o / t),
        ours,
        llamacpp,
        llamacpp_error,
        torch_eval_tokens_per_s: torch,
        torch_error,
    })
}

fn print_row(r: &Row, threads: usize) {
    let o = &r.ours;
    let opt = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1}"));
    let ratio = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.2}x"));
    let mb = |x: Option<u64>| x.map_or("-".into(), |v| format!("{:.0} MiB", mib(v)));
    println!(
        "{} ({:.0} MiB, {threads} threads, best of {} rounds)",
        r.model,
        mib(r.file_bytes),
        o.prefill_rounds.len()
    );
    println!(
        "{:<34} {:>12} {:>12} {:>8}",
        "", "orthoformer", "llama.cpp", "ratio"
    );
    let lc = r.llamacpp.as_ref();
    println!(
        "{:<34} {:>12.1} {:>12} {:>8}",
        format!("prefill, {} tokens (tok/s)", o.prompt_tokens),
        o.prefill_tokens_per_s,
        opt(lc.map(|l| l.prefill_tokens_per_s)),
        ratio(r.prefill_vs_llamacpp)
    );
    println!(
        "{:<34} {:>12.1} {:>12} {:>8}",
        format!("decode, {} greedy tokens (tok/s)", o.generated_tokens),
        o.decode_tokens_per_s,
        opt(lc.map(|l| l.decode_tokens_per_s)),
        ratio(r.decode_vs_llamacpp)
    );
    if let Some(e) = &r.llamacpp_error {
        println!("    llama.cpp: {e}");
    }
    println!(
        "{:<34} {:>12} {:>12} {:>8}",
        "eval windows (scored tok/s)",
        opt(o.eval_tokens_per_s),
        format!("{} (torch)", opt(r.torch_eval_tokens_per_s)),
        ratio(r.eval_vs_torch)
    );
    if let Some(e) = &r.torch_error {
        println!("    torch: {e}");
    }
    println!(
        "decode reads {:.1} MB of weights + {:.1} MB of KV cache per token; streaming read \
         {:.1} GB/s; decode at {:.0}% of that bound",
        o.weight_bytes_per_token as f64 / 1e6,
        o.kv_bytes_per_token as f64 / 1e6,
        o.read_bandwidth_gb_s,
        100.0 * o.decode_share_of_bandwidth
    );
    println!(
        "resident memory: {} before load, {} after load, {} after generating (peak {}): {} of \
         mapped file pages, {} of heap; weights {}",
        mb(r.rss_before_load_bytes),
        mb(o.rss_start_bytes),
        mb(o.rss_end_bytes),
        mb(o.peak_rss_bytes),
        mb(o.rss_file_end_bytes),
        mb(o.rss_anon_end_bytes),
        if r.weights_mapped {
            "mapped from the file"
        } else {
            "in memory"
        }
    );
    if let Some(l) = lc {
        let same = o
            .first_generated
            .iter()
            .zip(&l.first_generated)
            .take_while(|(a, b)| a == b)
            .count();
        println!(
            "first {same} of {} greedy tokens equal to llama.cpp's",
            o.first_generated.len().min(l.first_generated.len())
        );
    }
}

/// Runs `scripts/bench_llamacpp.py` on the same file and prompt.
fn run_llamacpp(
    args: &BenchArgs,
    path: &Path,
    prompt: &[u32],
    threads: usize,
) -> anyhow::Result<LlamaCpp> {
    if path.is_dir() {
        anyhow::bail!("llama.cpp reads GGUF files only");
    }
    let ids: Vec<String> = prompt.iter().map(u32::to_string).collect();
    let out = Command::new(&args.python)
        .arg(&args.llamacpp_script)
        .arg(path)
        .args(["--threads", &threads.to_string()])
        .args(["--gen", &args.gen_tokens.to_string()])
        .args(["--rounds", &args.rounds.max(1).to_string()])
        .args(["--ids", &ids.join(",")])
        .output()
        .with_context(|| format!("running {} {}", args.python, args.llamacpp_script.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "{} failed: {}",
            args.llamacpp_script.display(),
            err.lines().last().unwrap_or("")
        );
    }
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).with_context(|| {
        format!(
            "unexpected output from {}: {line}",
            args.llamacpp_script.display()
        )
    })
}

/// Runs `scripts/bench_llama_torch.py` (the eval windows); its scored tokens/s.
fn run_torch(args: &BenchArgs, path: &Path, threads: usize) -> anyhow::Result<f64> {
    if path.is_dir() {
        anyhow::bail!("the PyTorch script reads GGUF files only");
    }
    let out = Command::new(&args.python)
        .arg(&args.llama_torch_script)
        .arg(path)
        .arg(args.eval_tokens.to_string())
        .arg("256")
        .arg(threads.to_string())
        .output()
        .with_context(|| {
            format!(
                "running {} {}",
                args.python,
                args.llama_torch_script.display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "{} failed: {}",
            args.llama_torch_script.display(),
            err.lines().last().unwrap_or("")
        );
    }
    let line = text.lines().last().unwrap_or("");
    let v: serde_json::Value = serde_json::from_str(line).with_context(|| {
        format!(
            "unexpected output from {}: {line}",
            args.llama_torch_script.display()
        )
    })?;
    v["tokens_per_s"]
        .as_f64()
        .with_context(|| format!("no tokens_per_s in {line}"))
}

/// A `/proc/self/status` field in bytes (Linux only).
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    orthoformer::train::rss::status_field_bytes(&status, field)
}
