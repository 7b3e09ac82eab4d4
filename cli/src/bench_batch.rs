//! `orthoformer bench --model M --batch 4,16`: batch decoding of a pretrained model beside
//! llama.cpp's `llama-batched-bench` (the native build of `scripts/build_llamacpp.sh`), same
//! file, threads, prompt length and generated tokens, in one run (`bench::llama_batch`).

use std::path::Path;

use super::Outcome;
use super::bench::BenchArgs;
use super::bench_llama::{build_info, native_dir, run_peer};
use orthoformer::bench::llama_batch::{
    BatchTiming, batched_bench_args, bench_batch, check_batches, parse_batched_bench,
};
use orthoformer::bench::llama_batch_report::{BatchBenchReport, BatchBenchRow};
use orthoformer::bench::options::BenchOptions;
use orthoformer::infer::text::read_tokens;
use orthoformer::model::llama::load_engine;

/// Runs `bench --model ... --batch ...`: one report per model.
pub fn run(args: &BenchArgs, opts: &BenchOptions) -> anyhow::Result<Outcome> {
    opts.validate_model()?;
    check_batches(&args.batch)?;
    let threads = opts.setup_threads()?;
    for path in &args.model {
        let report = bench_model(args, opts, path, threads)?;
        super::common::emit(&report, args.json)?;
    }
    Ok(Outcome::Success)
}

fn bench_model(
    args: &BenchArgs,
    opts: &BenchOptions,
    path: &Path,
    threads: usize,
) -> anyhow::Result<BatchBenchReport> {
    let (p, g) = (opts.prompt_tokens, opts.gen_tokens);
    let loaded = load_engine(path)?;
    let mut model = loaded.model;
    model.kv_dtype = opts.kv_cache;
    model.dot = opts.dot;
    if p.saturating_add(g) > model.context() {
        anyhow::bail!(
            "--prompt-tokens + --gen-tokens = {} exceed the model's context {}",
            p.saturating_add(g),
            model.context()
        );
    }
    let largest = args.batch.iter().copied().max().unwrap_or(1);
    let text = read_tokens(&loaded.tokenizer, None, largest.saturating_mul(p))?;
    let bar = super::common::progress_bar(args.batch.len() as u64 + 1, "batch", args.json);
    let mut ours = Vec::new();
    for &b in &args.batch {
        ours.push(bench_batch(&mut model, &text, (p, g), b, opts.rounds())?);
        bar.inc(1);
    }
    let (peer, build) = if args.no_llamacpp {
        (
            Err("skipped (--no-llamacpp)".to_string()),
            "none".to_string(),
        )
    } else {
        peer(path, threads, (p, g), &args.batch, opts.rounds())
    };
    bar.finish_and_clear();
    Ok(BatchBenchReport {
        model: path.display().to_string(),
        threads,
        rounds: opts.rounds(),
        dot: opts.dot.to_string(),
        kv_cache: opts.kv_cache.to_string(),
        llamacpp_build: build,
        rows: ours
            .into_iter()
            .map(|o| BatchBenchRow::new(o, &peer))
            .collect(),
    })
}

/// `llama-batched-bench` run `rounds` times; per batch size the fastest of each phase. Its
/// error (no native build, a crash) is the peer's entry, never a figure.
fn peer(
    path: &Path,
    threads: usize,
    pg: (usize, usize),
    batches: &[usize],
    rounds: usize,
) -> (Result<Vec<BatchTiming>, String>, String) {
    let Some(bin) = native_dir().map(|d| d.join("bin").join("llama-batched-bench")) else {
        return (
            Err("no cache folder (set HOME or ORTHOFORMER_CACHE)".into()),
            "none".into(),
        );
    };
    if !bin.is_file() || path.is_dir() {
        let why = if path.is_dir() {
            "llama.cpp reads GGUF files only".to_string()
        } else {
            format!("no {} (run scripts/build_llamacpp.sh)", bin.display())
        };
        return (Err(why), "none".into());
    }
    let argv = batched_bench_args(path, threads, pg, batches);
    let mut best: Vec<BatchTiming> = Vec::new();
    for _ in 0..rounds.max(1) {
        let run = run_peer(&bin, &argv)
            .and_then(|out| parse_batched_bench(&out).map_err(anyhow::Error::msg));
        match run {
            Ok(rows) if best.is_empty() => best = rows,
            Ok(rows) => {
                for (b, r) in best.iter_mut().zip(rows) {
                    *b = BatchTiming::new(
                        b.batch,
                        b.prompt_tokens,
                        b.gen_tokens,
                        b.prompt_secs.min(r.prompt_secs),
                        b.decode_secs.min(r.decode_secs),
                    );
                }
            }
            Err(e) => return (Err(format!("{e:#}")), build_info(&bin)),
        }
    }
    (
        Ok(best),
        format!("{} ({})", bin.display(), build_info(&bin)),
    )
}
