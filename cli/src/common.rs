//! Helpers shared by the subcommands: JSON printing and progress bars.

use std::io::Write;

use indicatif::{ProgressBar, ProgressStyle};

/// Prints `value` as pretty JSON on stdout, followed by a newline.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    // Surface write failures as io::Error so `main` recognises a broken pipe.
    serde_json::to_writer_pretty(&mut out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// A progress bar on stderr for `len` steps, hidden when `quiet` (for `--json` runs and tests).
pub fn progress_bar(len: u64, message: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:12} [{elapsed_precise}] {wide_bar} {pos}/{len} ({eta} left) {prefix}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(message.to_string());
    bar
}

/// The training shapes `bench` and `memory` measure: configuration A (`config-a`, batch 16,
/// context 128), B (`config-b`, batch 8, context 256) and, where `tiny` is allowed, the tiny
/// preset (batch 4). Returns the row label, the preset and the batch size.
pub fn bench_shape(name: &str, allow_tiny: bool) -> anyhow::Result<(String, &'static str, usize)> {
    match name.trim().to_lowercase().as_str() {
        "a" => Ok(("A".into(), "config-a", 16)),
        "b" => Ok(("B".into(), "config-b", 8)),
        "tiny" if allow_tiny => Ok(("tiny".into(), "tiny", 4)),
        other => {
            let choices = if allow_tiny { "a, b or tiny" } else { "a or b" };
            anyhow::bail!("unknown config {other:?}: use {choices}")
        }
    }
}

/// Prints a report: JSON with `--json`, otherwise its text form (tables and paragraphs).
pub fn emit<R: orthoformer::io::table::Report>(report: &R, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(report);
    }
    let mut out = std::io::stdout().lock();
    // Surface write failures as io::Error so `main` recognises a broken pipe.
    out.write_all(report.render().as_bytes())?;
    out.flush()?;
    Ok(())
}
