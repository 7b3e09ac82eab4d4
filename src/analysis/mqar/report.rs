//! The MQAR report: the plan, every cell, the accuracy table (variant x width rows, setting
//! columns) as text, and the same grid as a [`Heatmap`].

use serde::Serialize;

use super::heatmap::Heatmap;
use super::run::{MqarCell, MqarPlan};

/// What `orthoformer mqar` reports (also its `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct MqarReport {
    /// The grid and budget that produced it.
    pub plan: MqarPlan,
    /// One entry per (setting, width, variant), best learning rate kept.
    pub cells: Vec<MqarCell>,
    /// Wall-clock seconds of the whole sweep.
    pub seconds: f64,
    /// Threads the run used.
    pub threads: usize,
}

impl MqarReport {
    fn rows(&self) -> Vec<(String, usize)> {
        let mut rows = Vec::new();
        for &w in &self.plan.widths {
            for v in &self.plan.variants {
                rows.push((v.name().to_string(), w));
            }
        }
        rows
    }

    fn cell(&self, variant: &str, width: usize, setting: (usize, usize)) -> Option<&MqarCell> {
        self.cells.iter().find(|c| {
            c.variant == variant && c.width == width && (c.seq_len, c.kv_pairs) == setting
        })
    }

    /// The accuracy table as aligned text: one row per (variant, width), one column per
    /// setting, accuracy in percent with the best learning rate; then one line per run that
    /// stopped on a non-finite loss or gradient.
    pub fn table(&self) -> String {
        let mut out = format!("{:<22} {:>6}", "variant", "width");
        for &(t, p) in &self.plan.settings {
            out += &format!(" {:>18}", format!("T={t} P={p}"));
        }
        out.push('\n');
        for (v, w) in self.rows() {
            out += &format!("{v:<22} {w:>6}");
            for &s in &self.plan.settings {
                let text = match self.cell(&v, w, s) {
                    Some(c) => format!("{:.1}% @{:.0e}", 100.0 * c.accuracy, c.best_lr),
                    None => "-".into(),
                };
                out += &format!(" {text:>18}");
            }
            out.push('\n');
        }
        for c in &self.cells {
            for r in &c.runs {
                if let Some(why) = &r.stopped {
                    out += &format!(
                        "{} d={} T={} P={} lr={:.0e} {why} (accuracy counted as 0)\n",
                        c.variant, c.width, c.seq_len, c.kv_pairs, r.lr
                    );
                }
            }
        }
        out
    }

    /// The grid as a heatmap.
    pub fn heatmap(&self) -> Heatmap {
        let rows = self.rows();
        let values = rows
            .iter()
            .flat_map(|(v, w)| {
                self.plan
                    .settings
                    .iter()
                    .map(move |&s| self.cell(v, *w, s).map(|c| c.accuracy))
            })
            .collect();
        Heatmap {
            title: format!(
                "MQAR accuracy ({} layers, V={}, {} steps x {}, best of {} LRs)",
                self.plan.layers,
                self.plan.vocab,
                self.plan.steps,
                self.plan.batch,
                self.plan.lrs.len()
            ),
            rows: rows.iter().map(|(v, w)| format!("{v} d={w}")).collect(),
            cols: self
                .plan
                .settings
                .iter()
                .map(|(t, p)| format!("T={t} P={p}"))
                .collect(),
            values,
        }
    }
}
