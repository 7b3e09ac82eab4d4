//! `orthoformer memory`: the peak resident memory of real training runs, measured, next to the
//! prediction. For each configuration and attention variant it runs this binary as a child
//! (`orthoformer train --steps 3` on the embedded TinyShakespeare, char tokens), which reports
//! its own peak resident set size (`VmHWM`) after its final checkpoint, and compares it with
//! the prediction: the measured process baseline, the data, and the model's account from
//! `orthoformer params` (weights, gradients, AdamW, activations, checkpoint write).
//!
//! The baseline is measured, never fitted to the rows: the peak of a child training the
//! `tiny` preset for the same steps on the first [`BASELINE_TEXT_BYTES`] bytes of the corpus,
//! less that run's own (negligible) predicted model and data. It holds what any training
//! process holds: the binary's code pages the training path executes, libraries, the rayon
//! workers and their allocator arenas. The idle binary (`orthoformer params`) is reported
//! beside it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use super::Outcome;
use orthoformer::data::{Corpus, TokenizerKind};
use orthoformer::model::{AttentionKind, GptConfig};
use orthoformer::train::memory::{DataMemory, predict};
use orthoformer::train::memory_report::{MemoryBaseline, MemoryReport, MemoryRow};
use orthoformer::train::session::prepare;

/// Flags of `orthoformer memory`.
#[derive(Debug, clap::Args)]
pub struct MemoryArgs {
    /// Configurations: a (config-a, batch 16, context 128), b (config-b, batch 8, context
    /// 256), tiny (batch 4, context 8: a quick check).
    #[arg(long, value_delimiter = ',', default_value = "a,b")]
    pub configs: Vec<String>,
    /// Attention variants [default: every variant].
    #[arg(long, value_delimiter = ',')]
    pub attention: Vec<String>,
    /// Training steps of each child run.
    #[arg(long, default_value_t = 3)]
    pub steps: usize,
    /// Largest accepted |measured / predicted - 1|.
    #[arg(long, default_value_t = 0.10)]
    pub tolerance: f64,
    /// Folder for the children's checkpoints [default: a temporary folder, removed after].
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Bytes of text the baseline run trains on.
pub const BASELINE_TEXT_BYTES: usize = 16 * 1024;

/// Runs `orthoformer memory`.
pub fn run(args: &MemoryArgs) -> anyhow::Result<Outcome> {
    if args.steps == 0 {
        anyhow::bail!("--steps must be at least 1");
    }
    if !(args.tolerance.is_finite() && args.tolerance >= 0.0) {
        anyhow::bail!("--tolerance must be 0 or a positive number, e.g. 0.1");
    }
    let kinds: Vec<AttentionKind> = if args.attention.is_empty() {
        AttentionKind::ALL.to_vec()
    } else {
        args.attention
            .iter()
            .map(|a| super::train::parse_attention(a))
            .collect::<anyhow::Result<_>>()?
    };
    let configs = args
        .configs
        .iter()
        .map(|c| super::common::bench_shape(c, true))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let exe = std::env::current_exe().context("locating the orthoformer binary")?;
    let (work, temporary) = match &args.work_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("orthoformer-memory-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&work).with_context(|| {
        format!(
            "cannot create {}: choose another --work-dir",
            work.display()
        )
    })?;
    let result = measure_all(args, &exe, &work, &configs, &kinds);
    if temporary {
        let _ = std::fs::remove_dir_all(&work);
    }
    let (baseline, rows) = result?;
    let report = MemoryReport {
        baseline,
        tolerance: args.tolerance,
        steps: args.steps,
        rows,
    };
    super::common::emit(&report, args.json)?;
    Ok(if report.all_within_tolerance() {
        Outcome::Success
    } else {
        Outcome::CheckFailed
    })
}

/// (label, preset, batch) per configuration.
type Plan = [(String, &'static str, usize)];

fn measure_all(
    args: &MemoryArgs,
    exe: &Path,
    work: &Path,
    configs: &Plan,
    kinds: &[AttentionKind],
) -> anyhow::Result<(MemoryBaseline, Vec<MemoryRow>)> {
    let bar = super::common::progress_bar(
        (2 + configs.len() * kinds.len()) as u64,
        "memory",
        args.json,
    );
    let idle = child_json(exe, &["params", "--preset", "tiny", "--json"])?
        .get("process_peak_rss_bytes")
        .and_then(serde_json::Value::as_u64);
    bar.inc(1);
    let corpus = Corpus::tiny_shakespeare();
    let baseline = measure_baseline(args, exe, work, &corpus, idle)?;
    bar.inc(1);
    let mut rows = Vec::new();
    for (label, preset, batch) in configs {
        let base = GptConfig::preset(preset)?;
        // The same tokens the child trains on: vocabulary and data size.
        let prepared = prepare(&corpus, TokenizerKind::Char, 0, base.context)?;
        let tokens = prepared.split.train.len() + prepared.split.val.len();
        let data = DataMemory::new(tokens, corpus.text.len(), true);
        for &kind in kinds {
            let cfg = GptConfig {
                attention: kind,
                vocab_size: prepared.tokenizer.vocab_size(),
                ..base.clone()
            };
            let out = work.join(format!("{label}-{}", kind.name()));
            let (batch_s, ctx_s, steps_s) = (
                batch.to_string(),
                cfg.context.to_string(),
                args.steps.to_string(),
            );
            let measured = train_peak(
                exe,
                &[
                    "--preset",
                    preset,
                    "--context",
                    &ctx_s,
                    "--batch",
                    &batch_s,
                    "--attention",
                    kind.name(),
                    "--steps",
                    &steps_s,
                ],
                &out,
            )?;
            let training = baseline.training;
            let base = training.unwrap_or(0) as usize;
            let predicted = predict(&cfg, *batch, cfg.context, data, base)?;
            let ratio = measured
                .filter(|_| training.is_some())
                .map(|m| m as f64 / predicted.total as f64);
            rows.push(MemoryRow {
                config: label.clone(),
                attention: kind.name().to_string(),
                batch: *batch,
                context: cfg.context,
                within_tolerance: ratio.map(|r| (r - 1.0).abs() <= args.tolerance),
                predicted,
                measured_bytes: measured,
                ratio,
            });
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok((baseline, rows))
}

/// The baseline run: `tiny` on the first [`BASELINE_TEXT_BYTES`] of the corpus.
fn measure_baseline(
    args: &MemoryArgs,
    exe: &Path,
    work: &Path,
    corpus: &Corpus,
    idle: Option<u64>,
) -> anyhow::Result<MemoryBaseline> {
    let mut end = BASELINE_TEXT_BYTES.min(corpus.text.len());
    while !corpus.text.is_char_boundary(end) {
        end -= 1;
    }
    let text = Corpus {
        text: corpus.text[..end].to_string(),
        source: "baseline".into(),
    };
    let path = work.join("baseline.txt");
    orthoformer::io::write_atomic_bytes(&path, text.text.as_bytes())?;
    let cfg = GptConfig::preset("tiny")?;
    let (batch, steps) = (4, args.steps.to_string());
    let prepared = prepare(&text, TokenizerKind::Char, 0, cfg.context)?;
    let tokens = prepared.split.train.len() + prepared.split.val.len();
    let cfg = GptConfig {
        vocab_size: prepared.tokenizer.vocab_size(),
        ..cfg
    };
    let tiny_run = train_peak(
        exe,
        &[
            "--preset",
            "tiny",
            "--data",
            &path.to_string_lossy(),
            "--batch",
            &batch.to_string(),
            "--steps",
            &steps,
        ],
        &work.join("baseline"),
    )?;
    let own = predict(
        &cfg,
        batch,
        cfg.context,
        DataMemory::new(tokens, end, false),
        0,
    )?
    .total;
    Ok(MemoryBaseline {
        idle,
        tiny_run,
        training: tiny_run.map(|p| p.saturating_sub(own as u64)),
    })
}

/// Runs `orthoformer train <flags> --out <out> --json` (one evaluation batch, no warm-up)
/// and returns the peak resident memory its summary reports.
fn train_peak(exe: &Path, flags: &[&str], out: &Path) -> anyhow::Result<Option<u64>> {
    let out = out.to_string_lossy();
    let mut all = vec!["train"];
    all.extend_from_slice(flags);
    all.extend_from_slice(&[
        "--eval-iters",
        "1",
        "--warmup",
        "0",
        "--out",
        &out,
        "--json",
    ]);
    let summary = child_json(exe, &all)?;
    Ok(summary
        .get("peak_rss_bytes")
        .and_then(serde_json::Value::as_u64))
}

/// Runs this binary with `args` and parses its JSON output.
fn child_json(exe: &Path, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let out = Command::new(exe)
        .args(args)
        .output()
        .with_context(|| format!("running {} {}", exe.display(), args.join(" ")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "`orthoformer {}` failed: {}",
            args.join(" "),
            err.lines().last().unwrap_or("(no message)")
        );
    }
    serde_json::from_slice(&out.stdout)
        .with_context(|| format!("`orthoformer {}` printed no JSON summary", args.join(" ")))
}
