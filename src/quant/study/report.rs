//! What `orthoformer quantize` reports for its study: one row per configuration (perplexity
//! per text, the mean and range over rotation seeds), the statistics of the activations
//! entering the linear layers, and how to read them; rendered by the one table writer
//! (`io::table`).

use serde::Serialize;

use super::config::{QuantConfig, RotationSet, StudySettings, WeightRounding};
use crate::io::finite::nan_max;
use crate::io::table::{Align, Block, Report, Table};
use crate::quant::act_stats::{ActStats, SiteStats};

/// One configuration's perplexities.
#[derive(Debug, Clone, Serialize)]
pub struct QuantRow {
    /// Row label.
    pub config: String,
    /// Weight bits.
    pub wbits: u32,
    /// Activation bits.
    pub abits: u32,
    /// KV-cache bits (16: f32).
    pub kv_bits: u32,
    /// Rotations.
    pub rotations: RotationSet,
    /// Weight rounding (when `wbits < 16`).
    pub method: WeightRounding,
    /// Mean perplexity over the seeds, per text in the report's `data` order.
    pub ppl: Vec<f64>,
    /// Least perplexity over the seeds, per text.
    pub ppl_min: Vec<f64>,
    /// Greatest perplexity over the seeds, per text.
    pub ppl_max: Vec<f64>,
    /// Each seed and its perplexity per text.
    pub by_seed: Vec<(u64, Vec<f64>)>,
}

impl QuantRow {
    /// The row of configuration `c` from its perplexities per seed (at least one).
    pub fn new(c: &QuantConfig, by_seed: Vec<(u64, Vec<f64>)>) -> Self {
        let texts = by_seed.first().map_or(0, |s| s.1.len());
        let col = |i: usize| by_seed.iter().map(move |s| s.1[i]);
        let n = by_seed.len().max(1) as f64;
        QuantRow {
            config: c.name.clone(),
            wbits: c.wbits,
            abits: c.abits,
            kv_bits: c.kv_bits,
            rotations: c.rotations,
            method: c.method,
            ppl: (0..texts).map(|i| col(i).sum::<f64>() / n).collect(),
            // Not `f64::min`/`f64::max`, which skip NaN: a NaN seed keeps its row's range NaN.
            ppl_min: (0..texts)
                .map(|i| -col(i).fold(f64::NEG_INFINITY, |m, x| nan_max(m, -x)))
                .collect(),
            ppl_max: (0..texts)
                .map(|i| col(i).fold(f64::NEG_INFINITY, nan_max))
                .collect(),
            by_seed,
        }
    }
}

/// Activation statistics of one unquantised configuration on one text.
#[derive(Debug, Clone, Serialize)]
pub struct QuantStatsRow {
    /// Rotations applied.
    pub rotations: RotationSet,
    /// The text.
    pub data: String,
    /// Statistics per site.
    pub stats: ActStats,
}

/// What the figures mean, printed under the tables.
pub const NOTE: &str = "the FP baseline is itself dequantised from the GGUF's weights (a \
    Q4_1 source sits on a 4-bit grid, which favours the unrotated model at 4 bits); weights are \
    rounded symmetrically per output channel (or group), activations per token at the inputs of \
    every decoder linear layer (lm_head and embedding stay FP), the KV cache per token and head \
    (asymmetric); R1 rotates the residual stream (norms folded), fold folds the norms as R1 does \
    and rotates nothing (Q = I), R2 each value head, R3 every \
    query/key head after RoPE (online), R4 down_proj's input (online); with several seeds a cell \
    is the mean (least-greatest) over the rotation seeds";

/// Everything `orthoformer quantize` reports.
#[derive(Debug, Clone, Serialize)]
pub struct QuantReport {
    /// The model file or folder.
    pub model: String,
    /// How to read the figures.
    pub note: &'static str,
    /// The texts, in column order.
    pub data: Vec<String>,
    /// Tokens scored per text (at most).
    pub tokens_per_text: usize,
    /// Perplexity window.
    pub context: usize,
    /// Weight group size (0: per output channel).
    pub group: usize,
    /// Weights on an asymmetric grid.
    pub weight_asym: bool,
    /// Activation clipping ratio.
    pub act_clip: f32,
    /// Activations asymmetric (a zero point per token).
    pub act_asym: bool,
    /// KV-cache group (0: per head).
    pub kv_group: usize,
    /// GPTQ's damping (a fraction of the mean Hessian diagonal).
    pub gptq_damp: f64,
    /// GPTQ took the columns by decreasing Hessian diagonal.
    pub gptq_act_order: bool,
    /// Rotation seeds.
    pub seeds: Vec<u64>,
    /// Calibration tokens (GPTQ, clipping search; 0 when unused).
    pub calibration_tokens: usize,
    /// One row per configuration.
    pub rows: Vec<QuantRow>,
    /// Activation statistics of the unquantised configurations.
    pub activation_stats: Vec<QuantStatsRow>,
}

impl QuantReport {
    /// The report of a study with settings `s`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: String,
        data: Vec<String>,
        tokens_per_text: usize,
        s: StudySettings,
        seeds: Vec<u64>,
        calibration_tokens: usize,
        rows: Vec<QuantRow>,
        activation_stats: Vec<QuantStatsRow>,
    ) -> Self {
        QuantReport {
            model,
            note: NOTE,
            data,
            tokens_per_text,
            context: s.context,
            group: s.group,
            weight_asym: s.weight_asym,
            act_clip: s.act_clip,
            act_asym: s.act_asym,
            kv_group: s.kv_group,
            gptq_damp: s.gptq.damp,
            gptq_act_order: s.gptq.act_order,
            seeds,
            calibration_tokens,
            rows,
            activation_stats,
        }
    }
}

fn file_name(d: &str) -> String {
    std::path::Path::new(d)
        .file_name()
        .map_or(d.to_string(), |n| n.to_string_lossy().into_owned())
}

impl Report for QuantReport {
    fn blocks(&self) -> Vec<Block> {
        let (l, r) = (Align::Left, Align::Right);
        let names: Vec<String> = self.data.iter().map(|d| file_name(d)).collect();
        let mut cols = vec![("config", l)];
        cols.extend(names.iter().map(|n| (n.as_str(), r)));
        let act = format!(
            "activations {} clip {}",
            if !self.act_asym {
                "symmetric"
            } else {
                "asymmetric"
            },
            self.act_clip
        );
        let mut ppl = Table::new(&cols).with_title(format!(
            "perplexity of {} ({} tokens per text, window {}, weight group {}, {act}, KV group \
             {}, seeds {:?})",
            self.model, self.tokens_per_text, self.context, self.group, self.kv_group, self.seeds
        ));
        for row in &self.rows {
            let mut cells = vec![row.config.clone()];
            for i in 0..row.ppl.len() {
                cells.push(if row.by_seed.len() > 1 {
                    format!(
                        "{:.3} ({:.3}-{:.3})",
                        row.ppl[i], row.ppl_min[i], row.ppl_max[i]
                    )
                } else {
                    format!("{:.3}", row.ppl[i])
                });
            }
            ppl.row(cells);
        }
        let mut st = Table::new(&[
            ("rotation", l),
            ("data", l),
            ("q/k/v in", r),
            ("gate/up in", r),
            ("o_proj in", r),
            ("down in", r),
        ])
        .with_title(
            "activations entering the linear layers (mean per-token kurtosis; mean \
             max|x|/mean|x|)",
        );
        let f = |x: &SiteStats| format!("{:.1}; {:.1}", x.mean_kurtosis, x.mean_max_over_mean);
        for s in &self.activation_stats {
            st.row([
                s.rotations.label(),
                file_name(&s.data),
                f(&s.stats.attn_in),
                f(&s.stats.mlp_in),
                f(&s.stats.o_in),
                f(&s.stats.down_in),
            ]);
        }
        st.note(format!("note: {}", self.note));
        vec![Block::Table(ppl), Block::Table(st)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rotate::set::RotateChoice;

    #[test]
    fn headers_cells_and_seed_ranges_agree() {
        let c = QuantConfig::new(
            (4, 8, 16),
            RotationSet::full(RotateChoice::Hadamard),
            WeightRounding::Gptq,
        );
        let row = QuantRow::new(&c, vec![(0, vec![12.0, 7.0]), (1, vec![14.0, 7.5])]);
        assert_eq!(
            (row.ppl[0], row.ppl_min[0], row.ppl_max[0]),
            (13.0, 12.0, 14.0)
        );
        let s = StudySettings {
            context: 256,
            group: 0,
            weight_asym: false,
            act_clip: 0.9,
            act_asym: true,
            kv_group: 0,
            gptq: Default::default(),
        };
        let report = QuantReport::new(
            "m.gguf".into(),
            vec!["/a/one.txt".into(), "two.txt".into()],
            1024,
            s,
            vec![0, 1],
            0,
            vec![row],
            vec![QuantStatsRow {
                rotations: c.rotations,
                data: "two.txt".into(),
                stats: ActStats::default(),
            }],
        );
        for t in report.tables() {
            t.check().unwrap();
        }
        let text = report.render();
        assert!(
            text.contains("one.txt") && text.contains("13.000 (12.000-14.000)"),
            "{text}"
        );
        assert!(text.contains("W4A8 GPTQ + R1+R2+R3+R4") && text.contains("asymmetric clip 0.9"));
    }

    #[test]
    fn a_nan_seed_keeps_the_range_nan() {
        let c = QuantConfig::new(
            (4, 16, 16),
            RotationSet::full(RotateChoice::Hadamard),
            WeightRounding::Rtn,
        );
        for seeds in [
            vec![(0, vec![f64::NAN]), (1, vec![7.0])],
            vec![(0, vec![7.0]), (1, vec![f64::NAN])],
        ] {
            let row = QuantRow::new(&c, seeds);
            assert!(
                row.ppl_min[0].is_nan() && row.ppl_max[0].is_nan(),
                "{row:?}"
            );
        }
    }
}
