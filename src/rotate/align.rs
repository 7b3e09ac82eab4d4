//! `orthoformer align` as one library operation: the hidden states of two models at one
//! layer on the same text, the orthogonal Procrustes map between them
//! ([`super::procrustes`]), and, when model B was made by `rotate` with a known kind and
//! seed, the distance of the fitted map to that true `Q`. The command line only parses its
//! flags into an [`AlignJob`], calls [`run`] and prints the [`AlignReport`].

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::options::AlignOptions;
use super::procrustes::procrustes;
use super::{RotateError, Rotation};
use crate::infer::text::{check_cache_fits, read_tokens};
use crate::io::table::{Block, Report};
use crate::model::llama::{Llama, load_model};

/// The two models, the text and the options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AlignJob {
    /// Model A (`.gguf` or Hugging Face folder).
    pub model: PathBuf,
    /// Model B, of the same width and tokenizer.
    pub model_b: PathBuf,
    /// The text (`None`: the embedded TinyShakespeare).
    pub data: Option<PathBuf>,
    /// Layer, tokens, chunk, and the true rotation if known.
    pub options: AlignOptions,
}

/// What [`run`] found.
#[derive(Clone, Debug, Serialize)]
pub struct AlignReport {
    /// Model A, as given.
    pub model_a: String,
    /// Model B, as given.
    pub model_b: String,
    /// The layer compared.
    pub layer: usize,
    /// Hidden states (rows) fitted.
    pub rows: usize,
    /// The width `C`.
    pub width: usize,
    /// `‖A·R − B‖ / ‖B‖`.
    pub relative_residual: f64,
    /// `‖A − B‖ / ‖B‖` (the identity map).
    pub identity_residual: f64,
    /// `‖R − Q‖_F / √C` against the true rotation, when given.
    pub distance_to_true_q: Option<f64>,
    /// `max |R − Q|` against the true rotation, when given.
    pub max_abs_diff_to_true_q: Option<f64>,
}

fn invalid(msg: String) -> crate::Error {
    crate::Error::Rotate(RotateError::Invalid(msg))
}

/// The hidden states after `o.layer` layers of the model at `path` on the first
/// `o.max_tokens` tokens of `data`, run in chunks of `o.context`; the width; and the
/// tokenizer. With `same_as`, the model's tokenizer must equal it (checked before any work).
fn hidden(
    path: &Path,
    data: Option<&Path>,
    o: &AlignOptions,
    same_as: Option<&crate::data::Tokenizer>,
) -> crate::Result<(Vec<f32>, usize, crate::data::Tokenizer)> {
    let loaded = load_model(path)?;
    if let Some(why) = same_as.and_then(|t| t.difference(&loaded.tokenizer)) {
        return Err(invalid(format!(
            "`model_b`'s tokenizer differs from `model`'s ({why}): align compares the two \
             models' hidden states token by token and needs the same tokenizer"
        )));
    }
    let cfg = &loaded.weights.cfg;
    if o.layer > cfg.n_layer {
        return Err(invalid(format!(
            "`layer` {} exceeds the model's {} layers",
            o.layer, cfg.n_layer
        )));
    }
    let max = cfg.max_context;
    let chunk = super::options::window_or(o.context, super::options::ALIGN_CHUNK, max);
    if chunk == 0 || chunk > max {
        return Err(invalid(format!(
            "`context` {chunk} must be between 1 and the model's {max}"
        )));
    }
    check_cache_fits(cfg, chunk)?;
    let ids = read_tokens(&loaded.tokenizer, data, o.max_tokens)?;
    let c = cfg.d_model;
    let tokenizer = loaded.tokenizer;
    let mut m = Llama::new(loaded.weights);
    let mut cache = m.new_cache(chunk)?;
    let mut out = Vec::with_capacity(ids.len() * c);
    for chunk in ids.chunks(chunk) {
        cache.clear();
        out.extend(m.hidden_states(chunk, &mut cache, o.layer)?);
    }
    Ok((out, c, tokenizer))
}

/// Aligns model B to model A as `job` says.
pub fn run(job: &AlignJob) -> crate::Result<AlignReport> {
    let o = &job.options;
    let data = job.data.as_deref();
    let (a, c, tok) = hidden(&job.model, data, o, None)?;
    let (b, cb, _) = hidden(&job.model_b, data, o, Some(&tok))?;
    if c != cb || a.len() != b.len() {
        return Err(invalid(format!(
            "the models disagree in width ({c} vs {cb}) or tokenization; align needs the same \
             tokenizer and width"
        )));
    }
    let fit = procrustes(&a, &b, c)?;
    let (mut dist, mut maxd) = (None, None);
    if let Some(kind) = o.true_rotation {
        let q = Rotation::of_kind(kind, c, o.seed)?.dense();
        let sq: f64 = fit.r.iter().zip(&q).map(|(x, y)| (x - y).powi(2)).sum();
        dist = Some((sq / c as f64).sqrt());
        maxd = Some(
            fit.r
                .iter()
                .zip(&q)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, crate::io::finite::nan_max),
        );
    }
    Ok(AlignReport {
        model_a: job.model.display().to_string(),
        model_b: job.model_b.display().to_string(),
        layer: o.layer,
        rows: a.len() / c,
        width: c,
        relative_residual: fit.relative_residual,
        identity_residual: fit.identity_residual,
        distance_to_true_q: dist,
        max_abs_diff_to_true_q: maxd,
    })
}

impl Report for AlignReport {
    fn blocks(&self) -> Vec<Block> {
        let c = self.width;
        let mut lines = vec![
            format!(
                "Procrustes at layer {} on {} hidden states of width {c}",
                self.layer, self.rows
            ),
            format!(
                "  ‖A·R − B‖/‖B‖   {:.3e}  (identity map: {:.3e})",
                self.relative_residual, self.identity_residual
            ),
        ];
        if let (Some(d), Some(m)) = (self.distance_to_true_q, self.max_abs_diff_to_true_q) {
            lines.push(format!("  ‖R − Q‖_F/√C    {d:.3e}  (max |R − Q| {m:.3e})"));
        }
        if self.rows < c || self.layer == 0 {
            lines.push(
                "  note: with fewer independent hidden states than the width (few rows, or layer \
                 0 where repeated tokens give repeated rows) the map is not determined by the data"
                    .into(),
            );
        }
        vec![Block::Text(lines.join("\n"))]
    }
}
