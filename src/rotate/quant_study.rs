//! The quantisation study of `orthoformer quantize`: configurations (bits, rotation, QuaRot's
//! online Hadamard), the grid QuaRot's table runs, the perplexity of each configuration on
//! real text, and the statistics of the activations entering the linear layers. The report
//! is a library type rendered by the one table writer (`io::table`).

use serde::Serialize;

use super::quant::quantize_model_weights;
use super::{Rotation, fold_norms, online_transform, rotate_down_inputs, rotate_weights};
use crate::infer::eval::{EvalOptions, evaluate};
use crate::io::table::{Align, Block, Report, Table};
use crate::model::llama::RowTransform;
use crate::model::llama::quant::{ActStats, SiteStats};
use crate::model::llama::{Llama, LlamaWeights};

/// Whether and how the residual stream is rotated before quantising.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RotateChoice {
    /// Quantise the original model.
    None,
    /// Haar-random rotation first.
    Random,
    /// Randomised Hadamard rotation first.
    Hadamard,
}

/// One configuration of the study.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantConfig {
    /// Row label (`W4A8 RTN + rotation`).
    pub name: String,
    /// Weight bits (16: unquantised).
    pub wbits: u32,
    /// Activation bits at the inputs of the decoder's linear layers (16: unquantised).
    pub abits: u32,
    /// Rotation before quantising.
    pub rotate: RotateChoice,
    /// QuaRot's online Hadamard transform on every down_proj input.
    pub online_hadamard: bool,
}

impl QuantConfig {
    fn new(
        name: impl Into<String>,
        wbits: u32,
        abits: u32,
        rotate: RotateChoice,
        on: bool,
    ) -> Self {
        QuantConfig {
            name: name.into(),
            wbits,
            abits,
            rotate,
            online_hadamard: on,
        }
    }

    /// Whether neither weights nor activations are quantised.
    pub fn is_full_precision(&self) -> bool {
        self.wbits >= 16 && self.abits >= 16
    }
}

/// QuaRot's grid: FP, W8A8, W4A16, W4A8 and W4A4, each as RTN, with a Hadamard rotation and
/// with the rotation plus the online Hadamard transform.
pub fn quarot_grid() -> Vec<QuantConfig> {
    let h = RotateChoice::Hadamard;
    let mut c = vec![
        QuantConfig::new("FP", 16, 16, RotateChoice::None, false),
        QuantConfig::new("FP + rotation", 16, 16, h, false),
        QuantConfig::new("FP + rotation + online H", 16, 16, h, true),
    ];
    for (wb, ab) in [(8, 8), (4, 16), (4, 8), (4, 4)] {
        c.push(QuantConfig::new(
            format!("W{wb}A{ab} RTN"),
            wb,
            ab,
            RotateChoice::None,
            false,
        ));
        c.push(QuantConfig::new(
            format!("W{wb}A{ab} RTN + rotation"),
            wb,
            ab,
            h,
            false,
        ));
        c.push(QuantConfig::new(
            format!("W{wb}A{ab} RTN + rot + online H"),
            wb,
            ab,
            h,
            true,
        ));
    }
    c
}

/// One configuration with the baselines that make it readable: the unquantised model (when
/// anything is changed) and the rotated unquantised model (when rotated and quantised).
pub fn single_with_baselines(
    wbits: u32,
    abits: u32,
    rotate: RotateChoice,
    online: bool,
) -> Vec<QuantConfig> {
    let quantised = wbits < 16 || abits < 16;
    let rotated = rotate != RotateChoice::None || online;
    let mut c = Vec::new();
    if rotated || quantised {
        c.push(QuantConfig::new("FP", 16, 16, RotateChoice::None, false));
    }
    if rotated && quantised {
        c.push(QuantConfig::new("FP + rotation", 16, 16, rotate, online));
    }
    c.push(QuantConfig::new(
        format!("W{wbits}A{abits}"),
        wbits,
        abits,
        rotate,
        online,
    ));
    c
}

/// The model of configuration `c` built from `base`: norms folded and rotated, down_proj
/// inputs transformed, weights rounded to `c.wbits` (one scale per output channel, or per
/// `group` inputs), activations rounded to `c.abits` at run time.
pub fn prepare(
    base: &LlamaWeights,
    c: &QuantConfig,
    seed: u64,
    group: usize,
) -> crate::Result<Llama> {
    let mut w = base.clone();
    let d = w.cfg.d_model;
    let r = match c.rotate {
        RotateChoice::None => None,
        RotateChoice::Random => Some(Rotation::random(d, seed)?),
        RotateChoice::Hadamard => Some(Rotation::hadamard(d, seed)?),
    };
    if let Some(r) = r {
        fold_norms(&mut w);
        rotate_weights(&mut w, &r)?;
    }
    let mut transform = None;
    if c.online_hadamard {
        let h = Rotation::hadamard(w.cfg.d_ff, seed.wrapping_add(1))?;
        rotate_down_inputs(&mut w, &h)?;
        transform = Some(RowTransform(std::sync::Arc::new(online_transform(h))));
    }
    quantize_model_weights(&mut w, c.wbits, group);
    let mut m = Llama::new(w);
    m.down_transform = transform;
    m.act_bits = Some(c.abits);
    Ok(m)
}

/// One text the study is measured on.
pub struct StudyText<'a> {
    /// Name in the report (a file name, or the embedded corpus's).
    pub name: String,
    /// Its token ids.
    pub tokens: &'a [u32],
}

/// Settings shared by every configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StudySettings {
    /// Window of the sliding-window perplexity (stride: half of it).
    pub context: usize,
    /// Weight group size along the input dimension (0: one scale per output channel).
    pub group: usize,
    /// Seed of the rotations.
    pub seed: u64,
}

/// Perplexity of every configuration on every text, with the activation statistics of the
/// unquantised configurations. `on_tokens` receives the number of tokens scored so far.
pub fn run_study(
    base: &LlamaWeights,
    configs: &[QuantConfig],
    texts: &[StudyText<'_>],
    s: StudySettings,
    on_tokens: &mut dyn FnMut(usize),
) -> crate::Result<(Vec<QuantRow>, Vec<QuantStatsRow>)> {
    let options = EvalOptions::sliding(s.context);
    let (mut rows, mut stats, mut done) = (Vec::new(), Vec::new(), 0usize);
    for c in configs {
        let mut model = prepare(base, c, s.seed, s.group)?;
        let mut ppl = Vec::new();
        for text in texts {
            model.stats = c.is_full_precision().then(ActStats::default);
            let before = done;
            let p = evaluate(&mut model, text.tokens, &options, &mut |n| {
                on_tokens(before + n)
            })?;
            done += text.tokens.len().saturating_sub(1);
            // A finite but huge loss (a quantised model losing the text) is a result; NaN, or
            // a full-precision loss that is not finite, is a broken model.
            if p.loss.is_nan() || (c.is_full_precision() && !p.loss.is_finite()) {
                let (name, loss) = (&c.name, p.loss);
                let msg = format!(
                    "{name}: the loss on {} is {loss} (NaN or infinite weights, or logits that overflow)",
                    text.name
                );
                return Err(super::RotateError::Invalid(msg).into());
            }
            ppl.push(p.perplexity);
            if let Some(st) = model.stats.take() {
                stats.push(QuantStatsRow {
                    rotate: c.rotate,
                    online_hadamard: c.online_hadamard,
                    data: text.name.clone(),
                    stats: st,
                });
            }
        }
        rows.push(QuantRow {
            config: c.name.clone(),
            wbits: c.wbits,
            abits: c.abits,
            rotate: c.rotate,
            online_hadamard: c.online_hadamard,
            ppl,
        });
    }
    Ok((rows, stats))
}

/// One configuration's perplexities.
#[derive(Debug, Clone, Serialize)]
pub struct QuantRow {
    /// Row label.
    pub config: String,
    /// Weight bits.
    pub wbits: u32,
    /// Activation bits.
    pub abits: u32,
    /// Rotation before quantising.
    pub rotate: RotateChoice,
    /// Online Hadamard on down_proj inputs.
    pub online_hadamard: bool,
    /// Perplexity per text, in the report's `data` order.
    pub ppl: Vec<f64>,
}

/// Activation statistics of one unquantised configuration on one text.
#[derive(Debug, Clone, Serialize)]
pub struct QuantStatsRow {
    /// Rotation applied.
    pub rotate: RotateChoice,
    /// Online Hadamard applied.
    pub online_hadamard: bool,
    /// The text.
    pub data: String,
    /// Statistics per site.
    pub stats: ActStats,
}

/// What the scaling of quantisation errors means, printed under the tables.
pub const NOTE: &str = "the FP baseline is itself dequantised from the GGUF's Q4_1/Q8_0 \
    weights; RTN is symmetric round-to-nearest, weights per output channel (or group), \
    activations per token at the inputs of every decoder linear layer (lm_head and embedding \
    stay FP); rotation folds RMSNorm weights first and changes the inputs of q/k/v and gate/up \
    only (o_proj and down_proj inputs are not on the residual stream); online H adds QuaRot's \
    run-time Hadamard transform on every down_proj input";

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
    /// One row per configuration.
    pub rows: Vec<QuantRow>,
    /// Activation statistics of the unquantised configurations.
    pub activation_stats: Vec<QuantStatsRow>,
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
        let mut ppl = Table::new(&cols).with_title(format!(
            "perplexity of {} ({} tokens per text, window {})",
            self.model, self.tokens_per_text, self.context
        ));
        for row in &self.rows {
            let mut cells = vec![row.config.clone()];
            cells.extend(row.ppl.iter().map(|p| format!("{p:.3}")));
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
            let rot = format!(
                "{}{}",
                serde_json::to_value(s.rotate)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                if s.online_hadamard { " + online H" } else { "" }
            );
            st.row([
                rot,
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

    #[test]
    fn the_grid_and_single_configurations() {
        let g = quarot_grid();
        assert_eq!(g.len(), 15);
        assert!(g[0].is_full_precision() && g[0].rotate == RotateChoice::None);
        let one = single_with_baselines(4, 8, RotateChoice::Hadamard, false);
        let names: Vec<&str> = one.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["FP", "FP + rotation", "W4A8"]);
        assert_eq!(
            single_with_baselines(16, 16, RotateChoice::None, false).len(),
            1
        );
        assert_eq!(
            single_with_baselines(8, 8, RotateChoice::None, false).len(),
            2
        );
    }

    #[test]
    fn headers_and_cells_agree() {
        let row = QuantRow {
            config: "W4A8 RTN + rot + online H".into(),
            wbits: 4,
            abits: 8,
            rotate: RotateChoice::Hadamard,
            online_hadamard: true,
            ppl: vec![12.3456, 7.0],
        };
        let report = QuantReport {
            model: "m.gguf".into(),
            note: NOTE,
            data: vec!["/a/one.txt".into(), "two.txt".into()],
            tokens_per_text: 1024,
            context: 256,
            group: 0,
            rows: vec![row],
            activation_stats: vec![QuantStatsRow {
                rotate: RotateChoice::Hadamard,
                online_hadamard: true,
                data: "two.txt".into(),
                stats: ActStats::default(),
            }],
        };
        for t in report.tables() {
            t.check().unwrap();
        }
        let text = report.render();
        assert!(
            text.contains("one.txt") && text.contains("12.346"),
            "{text}"
        );
        assert!(text.contains("hadamard + online H"), "{text}");
    }
}
