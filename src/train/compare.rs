//! The equal-budget comparison of attention variants (the main job): the same text,
//! tokenizer, split, model shape, initialisation seed, batches, steps and schedule for every
//! variant; only the attention differs. Each variant trains into its own checkpoint folder;
//! the result is a table, a loss-curve plot (PNG + SVG) and a JSON summary.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::metrics::MetricRecord;
use super::options::TrainOptions;
use super::plot::{Curve, stage_loss_plots};
use super::session::{FreshSpec, Prepared, Progress, Session, create_out};
use crate::Result;
use crate::model::{AttentionKind, Gpt, GptConfig};

/// One variant's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VariantResult {
    /// Attention name.
    pub attention: String,
    /// All parameters, trainable + frozen.
    pub params_total: usize,
    /// Parameters the optimizer updates.
    pub params_trainable: usize,
    /// Frozen parameters (orthogonal Q/K).
    pub params_frozen: usize,
    /// Training memory: weights, gradients, AdamW moments and activations, in bytes
    /// (`model::accounting`).
    pub memory_bytes: usize,
    /// Mean milliseconds per training step (forward, backward, clip, AdamW).
    pub ms_per_step: f64,
    /// Training tokens per second.
    pub tokens_per_s: f64,
    /// Final training-split loss.
    pub final_train_loss: f32,
    /// Final validation loss.
    pub final_val_loss: f32,
    /// `(val − val_baseline) / val_baseline` in percent.
    pub val_gap_pct: f64,
    /// Wall-clock seconds of the whole variant (training and evaluation).
    pub wall_s: f64,
    /// Its checkpoint folder.
    pub checkpoint: PathBuf,
    /// Evaluation records.
    pub metrics: Vec<MetricRecord>,
}

/// The whole comparison.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CompareSummary {
    /// The text.
    pub data: String,
    /// Tokenizer kind.
    pub tokenizer: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Model configuration shared by the variants (attention aside).
    pub model: serde_json::Value,
    /// Model initialisation seed.
    pub model_seed: u64,
    /// Training options.
    pub options: TrainOptions,
    /// The variant the gaps are measured against.
    pub baseline: String,
    /// One entry per variant.
    pub runs: Vec<VariantResult>,
}

/// Reports progress of the comparison to the caller.
pub trait CompareProgress {
    /// A progress sink for the variant `name` (index `i` of `n`).
    fn variant(&mut self, name: &str, i: usize, n: usize) -> Box<dyn Progress + '_>;
}

/// Trains every variant in `attentions` on `prepared` into `out/<attention>/`, then writes
/// `summary.json`, `loss.png` and `loss.svg` into `out` as one file set (`io::file_set`, tag
/// `compare`): all three or none.
#[allow(clippy::too_many_arguments)]
pub fn compare(
    base: &GptConfig,
    attentions: &[AttentionKind],
    prepared: &Prepared,
    options: &TrainOptions,
    model_seed: u64,
    out: &Path,
    stop: Option<&AtomicBool>,
    progress: &mut dyn CompareProgress,
) -> Result<CompareSummary> {
    options.validate()?;
    let names: Vec<String> = attentions.iter().map(|a| attention_name(*a)).collect();
    // Check every variant's configuration before training anything.
    for a in attentions {
        let mut cfg = base.clone();
        cfg.attention = *a;
        cfg.vocab_size = prepared.tokenizer.vocab_size();
        cfg.validate()?;
        super::session::check_training_fits(&cfg, options.batch, 0)?;
    }
    create_out(out)?;
    let mut runs = Vec::new();
    for (i, (a, name)) in attentions.iter().zip(&names).enumerate() {
        let mut cfg = base.clone();
        cfg.attention = *a;
        let spec = FreshSpec {
            model: cfg,
            model_seed,
            options: options.clone(),
        };
        let dir = out.join(name);
        let started = Instant::now();
        let mut session = Session::fresh_prepared(spec, prepared.clone(), &dir)?;
        {
            let mut p = progress.variant(name, i, attentions.len());
            session.run(stop, None, p.as_mut()).map_err(|e| match e {
                crate::Error::Train(super::TrainError::Interrupted { step }) => {
                    super::invalid(format!(
                        "interrupted while training {name} (step {step}); the comparison is \
                     unfinished; that variant's checkpoint is in {} (continue it with \
                     `orthoformer train --out {} --resume`)",
                        dir.display(),
                        dir.display()
                    ))
                }
                other => other,
            })?;
        }
        runs.push(result_of(
            &session,
            name,
            &dir,
            started.elapsed().as_secs_f64(),
        )?);
    }
    let baseline = names.iter().position(|n| n == "softmax").unwrap_or(0);
    let base_val = runs[baseline].final_val_loss as f64;
    for r in &mut runs {
        r.val_gap_pct = (r.final_val_loss as f64 - base_val) / base_val * 100.0;
    }
    let mut shared = serde_json::to_value(base).unwrap_or_default();
    if let Some(obj) = shared.as_object_mut() {
        obj.remove("attention");
        obj.insert("vocab_size".into(), prepared.tokenizer.vocab_size().into());
    }
    let summary = CompareSummary {
        data: prepared.data.source.clone(),
        tokenizer: prepared.tokenizer.kind().name().to_string(),
        vocab_size: prepared.tokenizer.vocab_size(),
        model: shared,
        model_seed,
        options: options.clone(),
        baseline: names[baseline].clone(),
        runs,
    };
    let curves: Vec<Curve> = summary
        .runs
        .iter()
        .map(|r| Curve {
            label: r.attention.clone(),
            records: r.metrics.clone(),
        })
        .collect();
    let title = format!(
        "{}: loss at equal budget ({} steps)",
        short_source(&summary.data),
        options.steps
    );
    let json = serde_json::to_vec_pretty(&summary)
        .map_err(|e| super::invalid(format!("serialising the summary: {e}")))?;
    // The summary and its plots appear together or not at all.
    let mut set = crate::io::file_set::FileSet::begin(out, "compare")?;
    stage_loss_plots(&curves, &title, &mut set, "loss.png", "loss.svg")?;
    set.write_bytes("summary.json", &json)?;
    set.commit()?;
    Ok(summary)
}

fn short_source(s: &str) -> String {
    Path::new(s)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| s.to_string())
}

/// The command-line name of an attention kind.
pub fn attention_name(kind: AttentionKind) -> String {
    kind.name().to_string()
}

fn result_of(session: &Session, name: &str, dir: &Path, wall_s: f64) -> Result<VariantResult> {
    let metrics = session.state.metrics.clone();
    let (mut steps, mut secs) = (0.0f64, 0.0f64);
    for w in metrics.windows(2) {
        if let Some(ms) = w[1].ms_per_step {
            let n = (w[1].step - w[0].step) as f64;
            steps += n;
            secs += n * ms / 1e3;
        }
    }
    let ms_per_step = if steps > 0.0 { secs * 1e3 / steps } else { 0.0 };
    let tokens = (session.options.batch * session.model.config().context) as f64;
    let last = metrics.last();
    let (trainable, frozen) = param_counts(&session.model);
    Ok(VariantResult {
        attention: name.to_string(),
        params_total: trainable + frozen,
        params_trainable: trainable,
        params_frozen: frozen,
        memory_bytes: training_memory(&session.model, session.options.batch)?,
        ms_per_step,
        tokens_per_s: if secs > 0.0 {
            steps * tokens / secs
        } else {
            0.0
        },
        final_train_loss: last.map_or(f32::NAN, |r| r.train_loss),
        final_val_loss: last.map_or(f32::NAN, |r| r.val_loss),
        val_gap_pct: 0.0,
        wall_s,
        checkpoint: dir.to_path_buf(),
        metrics,
    })
}

/// (trainable, frozen) parameter counts of `model`.
pub fn param_counts(model: &Gpt) -> (usize, usize) {
    (model.params().data.len(), model.frozen().len())
}

/// Training memory of `model` at batch `b` (weights, gradients, AdamW moments, activations),
/// from the model's accounting.
pub fn training_memory(model: &Gpt, b: usize) -> Result<usize> {
    let cfg = model.config();
    Ok(crate::model::accounting::account(cfg, b, cfg.context)?
        .memory
        .total)
}
