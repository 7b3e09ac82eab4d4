//! `orthoformer memory`, the library's part: which training runs to measure, and the report
//! from their measured peaks beside the prediction ([`super::memory::predict`]). Running a
//! training process is the front end's (the command line runs its own binary as a child,
//! `orthoformer train ... --json`, which reports its peak resident memory); it hands each
//! [`ChildRun`] to the `measure` callback of [`measure_all`].
//!
//! The baseline is measured, never fitted to the rows: the peak of a child training the
//! `tiny` preset for the same steps on the first [`BASELINE_TEXT_BYTES`] bytes of the corpus,
//! less that run's own (negligible) predicted model and data. It holds what any training
//! process holds: the binary's code pages, libraries, the worker threads and their allocator
//! arenas.

use std::path::{Path, PathBuf};

use super::memory::{DataMemory, predict};
use super::memory_report::{MemoryBaseline, MemoryOptions, MemoryReport, MemoryRow};
use super::options::BenchShape;
use crate::Result;
use crate::data::{Corpus, TokenizerKind};
use crate::model::{AttentionKind, GptConfig};
use crate::train::session::prepare;

/// Bytes of text the baseline run trains on.
pub const BASELINE_TEXT_BYTES: usize = 16 * 1024;

/// One training process to measure: `train --preset P --batch B --steps S` with one
/// evaluation batch and no warm-up, into `out`.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildRun {
    /// The preset.
    pub preset: &'static str,
    /// Its context, when set.
    pub context: Option<usize>,
    /// Sequences per batch.
    pub batch: usize,
    /// The attention variant, when set.
    pub attention: Option<AttentionKind>,
    /// Training steps.
    pub steps: usize,
    /// The text (`None`: the embedded TinyShakespeare).
    pub data: Option<PathBuf>,
    /// The checkpoint folder.
    pub out: PathBuf,
}

/// Measures every configuration and variant of `opts` (checked first) in the folder `work`:
/// `measure` runs one child and returns its peak resident memory (`None`: not reported),
/// `progress` is called after each child; `idle` is the idle binary's peak.
pub fn measure_all(
    opts: &MemoryOptions,
    work: &Path,
    idle: Option<u64>,
    measure: &mut dyn FnMut(&ChildRun) -> Result<Option<u64>>,
    progress: &mut dyn FnMut(),
) -> Result<MemoryReport> {
    opts.validate()?;
    let corpus = Corpus::tiny_shakespeare();
    let baseline = measure_baseline(opts.steps, work, &corpus, idle, measure)?;
    progress();
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
            let measured = measure(&ChildRun {
                preset,
                context: Some(cfg.context),
                batch,
                attention: Some(kind),
                steps: opts.steps,
                data: None,
                out: work.join(format!("{label}-{}", kind.name())),
            })?;
            let training = baseline.training;
            let predicted = predict(
                &cfg,
                batch,
                cfg.context,
                data,
                training.unwrap_or(0) as usize,
            )?;
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
            progress();
        }
    }
    Ok(MemoryReport {
        baseline,
        tolerance: opts.tolerance,
        steps: opts.steps,
        rows,
    })
}

/// The baseline run: `tiny` on the first [`BASELINE_TEXT_BYTES`] of the corpus.
fn measure_baseline(
    steps: usize,
    work: &Path,
    corpus: &Corpus,
    idle: Option<u64>,
    measure: &mut dyn FnMut(&ChildRun) -> Result<Option<u64>>,
) -> Result<MemoryBaseline> {
    let mut end = BASELINE_TEXT_BYTES.min(corpus.text.len());
    while !corpus.text.is_char_boundary(end) {
        end -= 1;
    }
    let text = Corpus {
        text: corpus.text[..end].to_string(),
        source: "baseline".into(),
    };
    let path = work.join("baseline.txt");
    crate::io::write_atomic_bytes(&path, text.text.as_bytes())?;
    let tiny = BenchShape::Tiny;
    let cfg = GptConfig::preset(tiny.preset())?;
    let prepared = prepare(&text, TokenizerKind::Char, 0, cfg.context)?;
    let tokens = prepared.split.train.len() + prepared.split.val.len();
    let cfg = GptConfig {
        vocab_size: prepared.tokenizer.vocab_size(),
        ..cfg
    };
    let tiny_run = measure(&ChildRun {
        preset: tiny.preset(),
        context: None,
        batch: tiny.batch(),
        attention: None,
        steps,
        data: Some(path),
        out: work.join("baseline"),
    })?;
    let data = DataMemory::new(tokens, end, false);
    let own = predict(&cfg, tiny.batch(), cfg.context, data, 0)?.total;
    Ok(MemoryBaseline {
        idle,
        tiny_run,
        training: tiny_run.map(|p| p.saturating_sub(own as u64)),
    })
}
