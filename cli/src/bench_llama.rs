//! `orthoformer bench --model M[,M2]`: a pretrained Llama model's inference beside its peers,
//! in one run on one machine. Ours: load (weights mapped), prefill of a prompt, greedy decode,
//! eval windows (`bench::llama`). llama.cpp: the native build of
//! `scripts/build_llamacpp.sh` (its `llama-bench`, same file, threads, prompt length and
//! generated tokens) when the cache holds one, else `scripts/bench_llamacpp.py` (the PyPI
//! wheel, labelled as the fallback) on the same file and prompt ids. PyTorch: `scripts/bench_llama_torch.py`, the eval windows in
//! float32. Each peer that cannot run is reported with the reason, never silently skipped.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use super::Outcome;
use super::bench::BenchArgs;
use orthoformer::bench::llama_report::{LlamaBenchReport, LlamaBenchRow, LlamaCppTiming};
use orthoformer::bench::machine_load::{self, MachineLoad};
use orthoformer::bench::options::BenchOptions;
use orthoformer::bench::{llama_run, llamacpp_native};

/// Runs the `--model` mode of `orthoformer bench`.
pub fn run(args: &BenchArgs, opts: &BenchOptions) -> anyhow::Result<Outcome> {
    if !args.batch.is_empty() {
        return super::bench_batch::run(args, opts);
    }
    opts.validate_model()?;
    let threads = opts.setup_threads()?;
    let mut rows = Vec::new();
    for path in &args.model {
        rows.push(bench_one(args, opts, path, threads)?);
    }
    super::common::emit(&LlamaBenchReport { threads, rows }, args.json)?;
    Ok(Outcome::Success)
}

fn bench_one(
    args: &BenchArgs,
    opts: &BenchOptions,
    path: &Path,
    threads: usize,
) -> anyhow::Result<LlamaBenchRow> {
    let before = machine_load::sample();
    let run = llama_run::run(path, opts)?;
    let llamacpp = if args.no_llamacpp {
        Err("skipped (--no-llamacpp)".to_string())
    } else {
        run_llamacpp(args, opts, path, &run.prompt, threads).map_err(|e| format!("{e:#}"))
    };
    let torch = if args.no_torch || opts.eval_tokens == 0 {
        Err("skipped".to_string())
    } else {
        run_torch(args, opts, path, threads).map_err(|e| format!("{e:#}"))
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = MachineLoad::between(
        before,
        machine_load::sample(),
        cpus,
        &run.ours.prefill_rounds,
        &run.ours.decode_rounds,
    );
    Ok(LlamaBenchRow::new(
        run.model,
        run.ours,
        llamacpp,
        torch,
        load,
        args.allow_busy,
    ))
}

/// Times llama.cpp: the native build when the cache has one, else the wheel's script.
fn run_llamacpp(
    args: &BenchArgs,
    opts: &BenchOptions,
    path: &Path,
    prompt: &[u32],
    threads: usize,
) -> anyhow::Result<LlamaCppTiming> {
    let dir = native_dir();
    let bin = dir.as_ref().map(|d| d.join("bin").join("llama-bench"));
    match bin {
        Some(b) if b.is_file() && !path.is_dir() => run_native(&b, opts, path, threads),
        _ => {
            let mut t = run_wheel(args, opts, path, prompt, threads)?;
            t.system_info = format!(
                "no native build in {} (run scripts/build_llamacpp.sh); PyPI wheel: {}",
                dir.map_or("~/.cache/orthoformer".into(), |d| d.display().to_string()),
                t.system_info
            );
            Ok(t)
        }
    }
}

/// Runs the native `llama-bench` twice (prefill; decode after the prompt) on the same file.
fn run_native(
    bin: &Path,
    opts: &BenchOptions,
    path: &Path,
    threads: usize,
) -> anyhow::Result<LlamaCppTiming> {
    let (p, g) = (opts.prompt_tokens, opts.gen_tokens);
    let mut records = Vec::new();
    for argv in llamacpp_native::llama_bench_args(path, threads, p, g, opts.rounds()) {
        let stdout = run_peer(bin, &argv)?;
        records.extend(llamacpp_native::parse_llama_bench(&stdout).map_err(anyhow::Error::msg)?);
    }
    let dir = bin.parent().unwrap_or(bin);
    llamacpp_native::timing_from_records(&records, p, g, dir, &build_info(bin))
        .map_err(anyhow::Error::msg)
}

/// The cache folder of the native llama.cpp build (`ORTHOFORMER_CACHE`, else `~/.cache`).
pub fn native_dir() -> Option<std::path::PathBuf> {
    let env = |k| std::env::var_os(k).map(std::path::PathBuf::from);
    llamacpp_native::cache_dir(env("ORTHOFORMER_CACHE").as_deref(), env("HOME").as_deref())
}

/// How the native build of `bin` was made, from the BUILD-INFO beside `bin/` (a build
/// without one is described as unknown, not guessed).
pub fn build_info(bin: &Path) -> String {
    let info = bin
        .parent()
        .and_then(Path::parent)
        .and_then(|d| orthoformer::io::safe_file::read_regular_text(&d.join("BUILD-INFO")).ok());
    info.as_deref()
        .and_then(llamacpp_native::build_description)
        .unwrap_or_else(|| "flags unknown: no BUILD-INFO".into())
}

/// Runs a peer binary and returns its stdout. A peer that dies is an error, never a slow
/// figure; a signal (the SIGILL of a CPU that advertises what it faults on) says to rebuild.
pub fn run_peer(bin: &Path, argv: &[String]) -> anyhow::Result<String> {
    let out = Command::new(bin)
        .args(argv)
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("");
        #[cfg(unix)]
        if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&out.status) {
            anyhow::bail!(
                "{} died with signal {sig} ({}): rebuild it with scripts/build_llamacpp.sh, \
                 which checks the build and falls back to explicit ISA flags {last}",
                bin.display(),
                signal_name(sig)
            );
        }
        anyhow::bail!("{} failed ({}): {last}", bin.display(), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The usual name of a Unix signal number (those a crashing peer meets), else `?`.
fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        _ => "?",
    }
}

/// Runs `scripts/bench_llamacpp.py` (the PyPI wheel) on the same file and prompt.
fn run_wheel(
    args: &BenchArgs,
    opts: &BenchOptions,
    path: &Path,
    prompt: &[u32],
    threads: usize,
) -> anyhow::Result<LlamaCppTiming> {
    if path.is_dir() {
        anyhow::bail!("llama.cpp reads GGUF files only");
    }
    let ids: Vec<String> = prompt.iter().map(u32::to_string).collect();
    let out = Command::new(&args.python)
        .arg(&args.llamacpp_script)
        .arg(path)
        .args(["--threads", &threads.to_string()])
        .args(["--gen", &opts.gen_tokens.to_string()])
        .args(["--rounds", &opts.rounds().to_string()])
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
fn run_torch(
    args: &BenchArgs,
    opts: &BenchOptions,
    path: &Path,
    threads: usize,
) -> anyhow::Result<f64> {
    if path.is_dir() {
        anyhow::bail!("the PyTorch script reads GGUF files only");
    }
    let out = Command::new(&args.python)
        .arg(&args.llama_torch_script)
        .arg(path)
        .arg(opts.eval_tokens.to_string())
        .arg(llama_run::EVAL_WINDOW.to_string())
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
