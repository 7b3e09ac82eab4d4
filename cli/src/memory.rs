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
use super::common::comma_default;
use orthoformer::bench::memory::{DataMemory, predict};
use orthoformer::bench::memory_report::{MemoryBaseline, MemoryOptions, MemoryReport, MemoryRow};
use orthoformer::bench::options::BenchShape;
use orthoformer::data::{Corpus, TokenizerKind};
use orthoformer::model::GptConfig;
use orthoformer::train::session::prepare;

/// Flags of `orthoformer memory`.
#[derive(Debug, clap::Args)]
pub struct MemoryArgs {
    /// Configurations: a (config-a, batch 16, context 128), b (config-b, batch 8, context
    /// 256), tiny (batch 4, context 8: a quick check).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = comma_default!(MemoryOptions::default().configs.iter().map(|c| c.name()))
    )]
    pub configs: Vec<String>,
    /// Attention variants [default: every variant].
    #[arg(long, value_delimiter = ',')]
    pub attention: Vec<String>,
    /// Training steps of each child run.
    #[arg(long, default_value_t = MemoryOptions::default().steps)]
    pub steps: usize,
    /// Largest accepted |measured / predicted - 1|.
    #[arg(long, default_value_t = MemoryOptions::default().tolerance)]
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

impl MemoryArgs {
    /// The library's options these flags ask for (names checked; no `--attention`: every
    /// variant, the default's).
    pub fn options(&self) -> anyhow::Result<MemoryOptions> {
        let base = MemoryOptions::default();
        Ok(MemoryOptions {
            configs: self
                .configs
                .iter()
                .map(|c| BenchShape::parse(c, true))
                .collect::<Result<_, _>>()?,
            attention: if self.attention.is_empty() {
                base.attention
            } else {
                self.attention
                    .iter()
                    .map(|a| super::train::parse_attention(a))
                    .collect::<anyhow::Result<_>>()?
            },
            steps: self.steps,
            tolerance: self.tolerance,
        })
    }
}

/// Runs `orthoformer memory`.
pub fn run(args: &MemoryArgs) -> anyhow::Result<Outcome> {
    let opts = args.options()?;
    opts.validate()?;
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
    let result = measure_all(&opts, args.json, &exe, &work);
    if temporary {
        let _ = std::fs::remove_dir_all(&work);
    }
    let (baseline, rows) = result?;
    let report = MemoryReport {
        baseline,
        tolerance: opts.tolerance,
        steps: opts.steps,
        rows,
    };
    super::common::emit(&report, args.json)?;
    Ok(if report.all_within_tolerance() {
        Outcome::Success
    } else {
        Outcome::CheckFailed
    })
}

fn measure_all(
    opts: &MemoryOptions,
    quiet: bool,
    exe: &Path,
    work: &Path,
) -> anyhow::Result<(MemoryBaseline, Vec<MemoryRow>)> {
    let bar = super::common::progress_bar(
        (2 + opts.configs.len() * opts.attention.len()) as u64,
        "memory",
        quiet,
    );
    let idle = child_json(exe, &["params", "--preset", "tiny", "--json"])?
        .get("process_peak_rss_bytes")
        .and_then(serde_json::Value::as_u64);
    bar.inc(1);
    let corpus = Corpus::tiny_shakespeare();
    let baseline = measure_baseline(opts.steps, exe, work, &corpus, idle)?;
    bar.inc(1);
    let mut rows = Vec::new();
    for &shape in &opts.configs {
        let (label, preset, batch) = (shape.label(), shape.preset(), shape.batch());
        let base = GptConfig::preset(preset)?;
        // The same tokens the child trains on: vocabulary and data size.
        let prepared = prepare(&corpus, TokenizerKind::Char, 0, base.context)?;
        let tokens = prepared.split.train.len() + prepared.split.val.len();
        let data = DataMemory::new(tokens, corpus.text.len(), true);
        for &kind in &opts.attention {
            let cfg = GptConfig {
                attention: kind,
                vocab_size: prepared.tokenizer.vocab_size(),
                ..base.clone()
            };
            let out = work.join(format!("{label}-{}", kind.name()));
            let (batch_s, ctx_s, steps_s) = (
                batch.to_string(),
                cfg.context.to_string(),
                opts.steps.to_string(),
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
            let predicted = predict(&cfg, batch, cfg.context, data, base)?;
            let ratio = measured
                .filter(|_| training.is_some())
                .map(|m| m as f64 / predicted.total as f64);
            rows.push(MemoryRow {
                config: label.to_string(),
                attention: kind.name().to_string(),
                batch,
                context: cfg.context,
                within_tolerance: ratio.map(|r| (r - 1.0).abs() <= opts.tolerance),
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
    steps: usize,
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
    let tiny = BenchShape::Tiny;
    let cfg = GptConfig::preset(tiny.preset())?;
    let (batch, steps) = (tiny.batch(), steps.to_string());
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
            tiny.preset(),
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
