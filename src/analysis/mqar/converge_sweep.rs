//! `orthoformer mqar --until-plateau` as one library operation: check a [`ConvergePlan`],
//! train each of its runs, and keep every finished run in its own file, so a grid cut short
//! (Ctrl-C, a crash, a killed job) loses only the run in progress.
//!
//! Files in the output folder (a report folder):
//!
//! ```text
//! OUT/runs/T<t>-P<p>-d<width>-<variant>-lr<lr>-seed<s>.json   one finished run (ConvergeRun)
//! OUT/mqar-converge.json                                      the report, when every run is done
//! ```
//!
//! Each file is written atomically when its run ends. A run is the unit of resumption: with
//! `resume`, a run whose file exists (and was trained with the same budget) is read back, not
//! trained; a run cut part way restarts from step 0. Without `resume`, a folder that already
//! holds runs is refused, so a finished grid is never overwritten by mistake.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::converge::{ConvergeObserver, ConvergePlan, ConvergeRun, RunKey};
use super::converge_report::ConvergeReport;
use crate::io::folder_kind::{self, FolderKind};
use crate::train::TrainError;

/// The report's file name in the output folder.
pub const REPORT_FILE: &str = "mqar-converge.json";

/// The folder of the per-run files in the output folder.
pub const RUNS_DIR: &str = "runs";

/// The largest run file read back (a run of a million evaluations is about 60 MB).
const MAX_RUN_FILE: u64 = 64 << 20;

/// How a grid run ended.
#[derive(Debug)]
pub enum ConvergeOutcome {
    /// Every run is done; the report was written.
    Finished(Box<ConvergeReport>),
    /// Ctrl-C: `finished` of `total` runs have their files; the run in progress was dropped.
    Stopped {
        /// Runs with a file.
        finished: usize,
        /// Runs in the grid.
        total: usize,
    },
}

fn invalid(msg: String) -> crate::Error {
    crate::train::invalid(msg)
}

/// The file name of run `key` (the learning rate in Rust's shortest exponent form, `1e-3`).
pub fn run_file_name(key: &RunKey) -> String {
    format!(
        "T{}-P{}-d{}-{}-lr{:e}-seed{}.json",
        key.seq_len,
        key.kv_pairs,
        key.width,
        key.variant.name(),
        key.lr,
        key.seed
    )
}

/// Reads the finished run at `path` if it exists; refuses a file that is not a run or
/// belongs to another run or budget (the grid would mix two plans).
fn read_run(path: &Path, key: &RunKey, plan: &ConvergePlan) -> crate::Result<Option<ConvergeRun>> {
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::Error::io(path, e)),
    };
    // A run file is a few kilobytes (one point per evaluation); refuse a huge one before
    // reading it into memory.
    if len > MAX_RUN_FILE {
        return Err(invalid(format!(
            "{} is {len} bytes, more than an MQAR run file can be ({MAX_RUN_FILE}): remove it \
             to train the run again",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| crate::Error::io(path, e))?;
    let run: ConvergeRun = serde_json::from_slice(&bytes).map_err(|e| {
        invalid(format!(
            "{} is not an MQAR run file ({e}): remove it to train the run again",
            path.display()
        ))
    })?;
    if run.key != *key || run.budget != plan.budget() {
        return Err(invalid(format!(
            "{} was trained with other settings than these flags (batch, evaluation, model, \
             task or stopping rule): resume with the flags it was run with, or use a new --out",
            path.display()
        )));
    }
    Ok(Some(run))
}

/// Runs `plan` (checked first) into `out`, continuing the runs already there when `resume`;
/// `stop` (Ctrl-C) ends the grid after writing nothing for the run in progress. On success
/// writes `mqar-converge.json` and returns the report.
pub fn converge(
    plan: &ConvergePlan,
    out: &Path,
    resume: bool,
    observer: &mut dyn ConvergeObserver,
    stop: Option<&AtomicBool>,
) -> crate::Result<ConvergeOutcome> {
    plan.validate()?;
    folder_kind::claim(out, FolderKind::Report)?;
    let runs_dir = out.join(RUNS_DIR);
    if !resume && has_runs(&runs_dir)? {
        return Err(invalid(format!(
            "{} already holds MQAR runs: pass --resume to continue that grid, or choose a new \
             --out",
            out.display()
        )));
    }
    std::fs::create_dir_all(&runs_dir).map_err(|e| crate::Error::io(&runs_dir, e))?;
    let started = std::time::Instant::now();
    let keys = plan.keys();
    let mut runs = Vec::with_capacity(keys.len());
    for key in &keys {
        let path: PathBuf = runs_dir.join(run_file_name(key));
        if let Some(run) = read_run(&path, key, plan)? {
            observer.finished(&key.label(), &run, true);
            runs.push(run);
            continue;
        }
        let run = match plan.train_run(*key, observer, stop) {
            Ok(run) => run,
            Err(crate::Error::Train(TrainError::Interrupted { .. })) => {
                return Ok(ConvergeOutcome::Stopped {
                    finished: runs.len(),
                    total: keys.len(),
                });
            }
            Err(e) => return Err(e),
        };
        let json = serde_json::to_vec_pretty(&run)
            .map_err(|e| invalid(format!("serialising {}: {e}", path.display())))?;
        crate::io::write_atomic_bytes(&path, &json)?;
        observer.finished(&key.label(), &run, false);
        runs.push(run);
    }
    let report = ConvergeReport::new(
        plan.clone(),
        runs,
        started.elapsed().as_secs_f64(),
        crate::nn::threads::current_threads(),
    );
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| invalid(format!("serialising {REPORT_FILE}: {e}")))?;
    crate::io::write_atomic_bytes(&out.join(REPORT_FILE), &json)?;
    Ok(ConvergeOutcome::Finished(Box::new(report)))
}

/// Whether `dir` holds any run file.
fn has_runs(dir: &Path) -> crate::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".json"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(crate::Error::io(dir, e)),
    }
}
