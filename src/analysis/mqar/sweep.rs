//! `orthoformer mqar` as one library operation: check an [`MqarPlan`], run its grid
//! ([`MqarPlan::run`]) and write `mqar.json` with its heatmap (`mqar_heatmap.png`, `.svg`)
//! into a report folder as one file set. The command line only parses its flags into a plan,
//! calls [`sweep`] and prints the report.

use std::path::{Path, PathBuf};

use super::generator::MqarTask;
use super::report::MqarReport;
use super::run::MqarPlan;
use crate::io::file_set::FileSet;
use crate::io::folder_kind::{self, FolderKind};
use crate::model::Gpt;
use crate::train::Observer;

fn invalid(msg: String) -> crate::Error {
    crate::train::invalid(msg)
}

/// The most runs one MQAR grid trains (settings × widths × variants × rates, and × seeds
/// for `--until-plateau`).
pub const MAX_RUNS: usize = 10_000;

impl MqarPlan {
    /// Checks the plan (before anything runs): every list non-empty, widths whole multiples
    /// of the head width (or narrower than one head), positive sizes and learning rates, and
    /// every task possible.
    pub fn validate(&self) -> crate::Result<()> {
        if self.settings.is_empty() || self.widths.is_empty() || self.lrs.is_empty() {
            return Err(invalid(
                "`settings`, `widths` and `lrs` each need at least one value".into(),
            ));
        }
        // Each list multiplies the runs: their product is capped before a run list is made.
        let runs = [
            self.settings.len(),
            self.widths.len(),
            self.variants.len(),
            self.lrs.len(),
        ]
        .into_iter()
        .try_fold(1usize, usize::checked_mul);
        if runs.is_none_or(|r| r > MAX_RUNS) {
            return Err(invalid(format!(
                "{} settings × {} widths × {} variants × {} rates make more than {MAX_RUNS} \
                 runs: give fewer values",
                self.settings.len(),
                self.widths.len(),
                self.variants.len(),
                self.lrs.len()
            )));
        }
        if self.head_dim == 0 || self.steps == 0 || self.batch == 0 || self.eval_examples == 0 {
            return Err(invalid(
                "`head_dim`, `steps`, `batch` and `eval_examples` must be at least 1".into(),
            ));
        }
        let fits = |w: usize| w > 0 && (w < self.head_dim || w.is_multiple_of(self.head_dim));
        if let Some(w) = self.widths.iter().find(|&&w| !fits(w)) {
            return Err(invalid(format!(
                "width {w} is not a positive multiple of `head_dim` {}",
                self.head_dim
            )));
        }
        if let Some(lr) = self.lrs.iter().find(|&&lr| !(lr.is_finite() && lr > 0.0)) {
            return Err(invalid(format!(
                "learning rate {lr} must be a positive number"
            )));
        }
        // Every model's own rules (a learned temperature on a linear variant, ...).
        for &kind in &self.variants {
            for &w in &self.widths {
                let t = self.settings[0].0;
                self.model_config(kind, w, t).validate()?;
            }
        }
        for &(t, p) in &self.settings {
            let task = MqarTask {
                vocab_size: self.vocab,
                ..MqarTask::new(t, p)
            };
            task.validate()
                .map_err(|e| invalid(format!("setting {t}:{p}: {e}")))?;
        }
        Ok(())
    }
}

/// Runs `plan` (checked first) and writes its report and heatmap into `out` (a report
/// folder, created). `progress` sees each run's start and each step. Returns the report and
/// the files written (`mqar.json`, the PNG and the SVG).
pub fn sweep(
    plan: &MqarPlan,
    out: &Path,
    progress: &mut dyn Observer<Gpt>,
) -> crate::Result<(MqarReport, [PathBuf; 3])> {
    plan.validate()?;
    folder_kind::claim(out, FolderKind::Report)?;
    let start = std::time::Instant::now();
    let cells = plan.run(progress)?;
    let report = MqarReport {
        plan: plan.clone(),
        cells,
        seconds: start.elapsed().as_secs_f64(),
        threads: crate::nn::threads::current_threads(),
    };
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| invalid(format!("serialising mqar.json: {e}")))?;
    // The report and its heatmap appear together or not at all (`io::file_set`).
    let mut set = FileSet::begin(out, "mqar")?;
    set.write_bytes("mqar.json", &json)?;
    report
        .heatmap()
        .stage(&mut set, "mqar_heatmap.png", "mqar_heatmap.svg")?;
    set.commit()?;
    let files = ["mqar.json", "mqar_heatmap.png", "mqar_heatmap.svg"].map(|f| out.join(f));
    Ok((report, files))
}
