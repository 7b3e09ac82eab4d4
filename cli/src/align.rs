//! `orthoformer align`: orthogonal Procrustes between two models' hidden states at one layer
//! on the same text. When model B is a rotation of model A (from `orthoformer rotate`), give
//! the rotation's kind and seed and the recovered map is compared with the true `Q`.

use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use super::Outcome;
use super::common::print_json;
use super::pretrained::read_tokens;
use super::rotate::RotationKind;
use crate::output::outln;
use orthoformer::model::llama::{Llama, load_model};
use orthoformer::rotate::Rotation;
use orthoformer::rotate::options::AlignOptions;
use orthoformer::rotate::procrustes::procrustes;

/// Flags of `orthoformer align`.
#[derive(Debug, clap::Args)]
pub struct AlignArgs {
    /// Model A (`.gguf` or Hugging Face folder).
    #[arg(long)]
    pub model: PathBuf,
    /// Model B, of the same width and tokenizer.
    #[arg(long)]
    pub model_b: PathBuf,
    /// Text whose hidden states are aligned [default: the embedded TinyShakespeare].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Layer: the residual stream after this many decoder layers (0 = embeddings).
    #[arg(long)]
    pub layer: usize,
    /// Tokens of text (hidden-state rows); needs at least the width for a well-posed fit.
    #[arg(long, default_value_t = AlignOptions::default().max_tokens)]
    pub max_tokens: usize,
    /// Tokens per forward chunk (the model's attention window here).
    #[arg(long, default_value_t = AlignOptions::default().context)]
    pub context: usize,
    /// B was made by `rotate --rotation KIND --seed S`: compare the map with that `Q`.
    #[arg(long, value_enum)]
    pub true_rotation: Option<RotationKind>,
    /// Seed of --true-rotation.
    #[arg(long, default_value_t = AlignOptions::default().seed)]
    pub seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    model_a: String,
    model_b: String,
    layer: usize,
    rows: usize,
    width: usize,
    relative_residual: f64,
    identity_residual: f64,
    /// `‖R − Q‖_F / √C` against the true rotation, when given.
    distance_to_true_q: Option<f64>,
    max_abs_diff_to_true_q: Option<f64>,
}

impl AlignArgs {
    /// The library's options these flags ask for.
    pub fn options(&self) -> AlignOptions {
        AlignOptions {
            layer: self.layer,
            max_tokens: self.max_tokens,
            context: self.context,
            true_rotation: self.true_rotation.map(Into::into),
            seed: self.seed,
        }
    }
}

fn hidden(
    path: &std::path::Path,
    data: Option<&std::path::Path>,
    args: &AlignOptions,
) -> anyhow::Result<(Vec<f32>, usize)> {
    let loaded = load_model(path).context("loading the model")?;
    if args.layer > loaded.weights.cfg.n_layer {
        anyhow::bail!(
            "--layer {} exceeds the model's {} layers",
            args.layer,
            loaded.weights.cfg.n_layer
        );
    }
    let max = loaded.weights.cfg.max_context;
    if args.context == 0 || args.context > max {
        anyhow::bail!(
            "--context {} must be between 1 and the model's {max}",
            args.context
        );
    }
    super::pretrained::check_cache_fits(&loaded.weights.cfg, args.context)?;
    let ids = read_tokens(&loaded.tokenizer, data, args.max_tokens)?;
    let c = loaded.weights.cfg.d_model;
    let mut m = Llama::new(loaded.weights);
    let ctx = args.context;
    let mut cache = m.new_cache(ctx)?;
    let mut out = Vec::with_capacity(ids.len() * c);
    for chunk in ids.chunks(ctx) {
        cache.clear();
        out.extend(m.hidden_states(chunk, &mut cache, args.layer)?);
    }
    Ok((out, c))
}

/// Runs `orthoformer align`.
pub fn run(args: &AlignArgs) -> anyhow::Result<Outcome> {
    let o = args.options();
    let (a, c) = hidden(&args.model, args.data.as_deref(), &o)?;
    let (b, cb) = hidden(&args.model_b, args.data.as_deref(), &o)?;
    if c != cb || a.len() != b.len() {
        anyhow::bail!(
            "the models disagree in width ({c} vs {cb}) or tokenization; align needs the same tokenizer and width"
        );
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
                .fold(0.0, f64::max),
        );
    }
    let r = Report {
        model_a: args.model.display().to_string(),
        model_b: args.model_b.display().to_string(),
        layer: o.layer,
        rows: a.len() / c,
        width: c,
        relative_residual: fit.relative_residual,
        identity_residual: fit.identity_residual,
        distance_to_true_q: dist,
        max_abs_diff_to_true_q: maxd,
    };
    if args.json {
        print_json(&r)?;
    } else {
        outln!(
            "Procrustes at layer {} on {} hidden states of width {c}",
            r.layer,
            r.rows
        )?;
        outln!(
            "  ‖A·R − B‖/‖B‖   {:.3e}  (identity map: {:.3e})",
            r.relative_residual,
            r.identity_residual
        )?;
        if let (Some(d), Some(m)) = (dist, maxd) {
            outln!("  ‖R − Q‖_F/√C    {d:.3e}  (max |R − Q| {m:.3e})")?;
        }
        if r.rows < c || o.layer == 0 {
            outln!(
                "  note: with fewer independent hidden states than the width (few rows, or layer 0 \
                 where repeated tokens give repeated rows) the map is not determined by the data"
            )?;
        }
    }
    Ok(Outcome::Success)
}
