//! `orthoformer memory`: the peak resident memory of real training runs, measured, next to the
//! prediction. The library ([`memory_run::measure_all`]) says which runs to measure and makes
//! the report; this command runs each as a child of its own binary (`orthoformer train
//! --steps 3 ... --json`, which reports its own peak resident set size, `VmHWM`, after its
//! final checkpoint). The idle binary (`orthoformer params`) is reported beside the baseline.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use super::Outcome;
use super::common::comma_default;
use orthoformer::bench::memory_report::MemoryOptions;
use orthoformer::bench::memory_run::{self, ChildRun};
use orthoformer::bench::options::BenchShape;
use orthoformer::io::file_set::{Claim, Output, claim_outputs};

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
    // Claimed (checked and locked) before any child runs, held to the end: the children's
    // checkpoints and the baseline text are written only into a new or empty folder.
    let _claim = claim_work_dir(&work)?;
    let bar = super::common::progress_bar(
        (2 + opts.configs.len() * opts.attention.len()) as u64,
        "memory",
        args.json,
    );
    // A child's failure is kept as it was said, and the library sees a stand-in.
    let mut failed: Option<anyhow::Error> = None;
    let result = child_json(&exe, &["params", "--preset", "tiny", "--json"]).and_then(|idle| {
        bar.inc(1);
        let idle = idle
            .get("process_peak_rss_bytes")
            .and_then(serde_json::Value::as_u64);
        let mut measure = |child: &ChildRun| {
            train_peak(&exe, child).map_err(|e| {
                let lib = orthoformer::Error::io(&child.out, std::io::Error::other(e.to_string()));
                failed = Some(e);
                lib
            })
        };
        let report = memory_run::measure_all(&opts, &work, idle, &mut measure, &mut || bar.inc(1));
        report.map_err(|e| failed.take().unwrap_or_else(|| e.into()))
    });
    bar.finish_and_clear();
    if temporary {
        let _ = std::fs::remove_dir_all(&work);
    }
    let report = result?;
    super::common::emit(&report, args.json)?;
    Ok(if report.all_within_tolerance() {
        Outcome::Success
    } else {
        Outcome::CheckFailed
    })
}

/// Claims the work folder: locked against a second `memory` run, and new or empty, so that
/// the baseline text and the children's checkpoints never replace a file already there (a
/// `baseline.txt` of the user's was overwritten, a folder of theirs was trained into).
fn claim_work_dir(work: &Path) -> anyhow::Result<Claim> {
    let claim = claim_outputs(&[], &[Output::folder("work_dir", work)])?;
    if let Ok(entries) = std::fs::read_dir(work) {
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if !names.is_empty() {
            names.sort();
            let shown = names.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
            let more = if names.len() > 3 { ", ..." } else { "" };
            anyhow::bail!(
                "--work-dir {} is not empty (it holds {shown}{more}): the children's checkpoints \
                 are written only into a new or empty folder; give one",
                work.display()
            );
        }
    }
    std::fs::create_dir_all(work).with_context(|| {
        format!(
            "cannot create {}: choose another --work-dir",
            work.display()
        )
    })?;
    Ok(claim)
}

/// Runs `orthoformer train` as `child` says (one evaluation batch, no warm-up, `--json`) and
/// returns the peak resident memory its summary reports.
fn train_peak(exe: &Path, child: &ChildRun) -> anyhow::Result<Option<u64>> {
    let (context, batch, steps) = (
        child.context.map(|c| c.to_string()),
        child.batch.to_string(),
        child.steps.to_string(),
    );
    let (data, out) = (
        child.data.as_ref().map(|d| d.to_string_lossy()),
        child.out.to_string_lossy(),
    );
    let mut all = vec!["train", "--preset", child.preset];
    if let Some(c) = &context {
        all.extend(["--context", c]);
    }
    if let Some(d) = &data {
        all.extend(["--data", d]);
    }
    all.extend(["--batch", &batch]);
    if let Some(a) = child.attention {
        all.extend(["--attention", a.name()]);
    }
    all.extend(["--steps", &steps]);
    all.extend([
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
