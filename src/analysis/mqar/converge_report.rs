//! The report of `mqar --until-plateau`: every run, and per (setting, width, variant,
//! learning rate) the seeds side by side: steps to 90% and to 99% held-out accuracy, the
//! final and best accuracy, the steps trained and why each run stopped, with their means.
//!
//! Means of steps to a level are over the seeds that reached it (the count says how many
//! did); a level no seed reached has no mean.

use serde::Serialize;

use super::converge::{ConvergePlan, ConvergeRun};
use super::plateau::StopReason;
use crate::model::AttentionKind;

/// One row of the table: a variant at a width, setting and learning rate, over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct ConvergeCell {
    /// Sequence length `T`.
    pub seq_len: usize,
    /// Key-value pairs `P`.
    pub kv_pairs: usize,
    /// Model width.
    pub width: usize,
    /// Attention variant.
    pub variant: AttentionKind,
    /// Peak learning rate.
    pub lr: f64,
    /// The seeds, in the order of the per-seed lists below.
    pub seeds: Vec<u64>,
    /// Per seed: step of the first evaluation at or above 90% (`null`: not reached).
    pub steps_to_90: Vec<Option<usize>>,
    /// Per seed: step of the first evaluation at or above 99%.
    pub steps_to_99: Vec<Option<usize>>,
    /// Per seed: accuracy at the last evaluation.
    pub final_accuracy: Vec<f64>,
    /// Per seed: best accuracy of any evaluation.
    pub best_accuracy: Vec<f64>,
    /// Per seed: steps trained.
    pub steps: Vec<usize>,
    /// Per seed: why the run stopped.
    pub stopped: Vec<StopReason>,
    /// Mean steps to 90% over the seeds that reached it (`null`: none did).
    pub mean_steps_to_90: Option<f64>,
    /// Mean steps to 99% over the seeds that reached it.
    pub mean_steps_to_99: Option<f64>,
    /// Mean final accuracy over the seeds.
    pub mean_final_accuracy: f64,
    /// Mean best accuracy over the seeds.
    pub mean_best_accuracy: f64,
}

/// What `orthoformer mqar --until-plateau` reports (also `mqar-converge.json` and `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct ConvergeReport {
    /// The grid, seeds and stopping rule.
    pub plan: ConvergePlan,
    /// One row per (setting, width, variant, learning rate), in the plan's order.
    pub cells: Vec<ConvergeCell>,
    /// Every run, with its accuracy curve.
    pub runs: Vec<ConvergeRun>,
    /// Wall-clock seconds of this invocation (runs read back from files cost none).
    pub seconds: f64,
    /// Threads the runs used.
    pub threads: usize,
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

impl ConvergeCell {
    fn of(runs: &[&ConvergeRun]) -> Option<Self> {
        let k = runs.first()?.key;
        let each = |f: &dyn Fn(&ConvergeRun) -> f64| mean(runs.iter().map(|r| f(r)));
        let reached = |v: &[Option<usize>]| mean(v.iter().flatten().map(|&s| s as f64));
        let to_90: Vec<_> = runs.iter().map(|r| r.steps_to_90).collect();
        let to_99: Vec<_> = runs.iter().map(|r| r.steps_to_99).collect();
        Some(ConvergeCell {
            seq_len: k.seq_len,
            kv_pairs: k.kv_pairs,
            width: k.width,
            variant: k.variant,
            lr: k.lr,
            seeds: runs.iter().map(|r| r.key.seed).collect(),
            mean_steps_to_90: reached(&to_90),
            mean_steps_to_99: reached(&to_99),
            steps_to_90: to_90,
            steps_to_99: to_99,
            final_accuracy: runs.iter().map(|r| r.final_accuracy).collect(),
            best_accuracy: runs.iter().map(|r| r.best_accuracy).collect(),
            steps: runs.iter().map(|r| r.steps).collect(),
            stopped: runs.iter().map(|r| r.stopped).collect(),
            mean_final_accuracy: each(&|r| r.final_accuracy).unwrap_or(0.0),
            mean_best_accuracy: each(&|r| r.best_accuracy).unwrap_or(0.0),
        })
    }
}

/// `mean (reached/seeds): s0, s1, ...` with `-` for a seed that did not reach the level.
fn steps_text(mean: Option<f64>, each: &[Option<usize>]) -> String {
    let got = each.iter().flatten().count();
    let list: Vec<String> = each
        .iter()
        .map(|s| s.map_or("-".into(), |s| s.to_string()))
        .collect();
    let m = mean.map_or("-".into(), |m| format!("{m:.0}"));
    format!("{m} ({got}/{}): {}", each.len(), list.join(" "))
}

impl ConvergeReport {
    /// The report of `runs` (any order) under `plan`: one cell per (setting, width, variant,
    /// learning rate) that has runs, seeds in the plan's order.
    pub fn new(plan: ConvergePlan, runs: Vec<ConvergeRun>, seconds: f64, threads: usize) -> Self {
        let mut cells = Vec::new();
        let g = &plan.grid;
        for &(t, p) in &g.settings {
            for &w in &g.widths {
                for &v in &g.variants {
                    for &lr in &g.lrs {
                        let mut of_cell: Vec<&ConvergeRun> = Vec::new();
                        for &s in &plan.seeds {
                            let k = (t, p, w, v, lr, s);
                            of_cell.extend(runs.iter().find(|r| {
                                let q = r.key;
                                (q.seq_len, q.kv_pairs, q.width, q.variant, q.lr, q.seed) == k
                            }));
                        }
                        cells.extend(ConvergeCell::of(&of_cell));
                    }
                }
            }
        }
        ConvergeReport {
            plan,
            cells,
            runs,
            seconds,
            threads,
        }
    }

    /// The table as aligned text: one block per cell (steps to 90% and 99% as the mean over
    /// the seeds that reached it, how many did and each seed's step; final accuracy as the
    /// mean and each seed's; each seed's stop reason), then one line per diverged run.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for c in &self.cells {
            let finals: Vec<String> = c
                .final_accuracy
                .iter()
                .map(|a| format!("{:.1}%", 100.0 * a))
                .collect();
            let why: Vec<&str> = c.stopped.iter().map(|r| r.name()).collect();
            let steps: Vec<String> = c.steps.iter().map(|s| s.to_string()).collect();
            out += &format!(
                "T={} P={} d={} {} lr={:e}, seeds {}\n",
                c.seq_len,
                c.kv_pairs,
                c.width,
                c.variant.name(),
                c.lr,
                c.seeds
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            out += &format!(
                "  steps to 90%    {}\n",
                steps_text(c.mean_steps_to_90, &c.steps_to_90)
            );
            out += &format!(
                "  steps to 99%    {}\n",
                steps_text(c.mean_steps_to_99, &c.steps_to_99)
            );
            out += &format!(
                "  final accuracy  {:.1}%: {}\n",
                100.0 * c.mean_final_accuracy,
                finals.join(" ")
            );
            out += &format!(
                "  stopped         {} after {} steps\n",
                why.join(" "),
                steps.join(" ")
            );
        }
        for r in &self.runs {
            if let Some(note) = &r.note {
                out += &format!("{} {note} (accuracy counted as 0)\n", r.key.label());
            }
        }
        out
    }
}
