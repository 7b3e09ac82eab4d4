//! `orthoformer align`: orthogonal Procrustes between two models' hidden states at one layer
//! on the same text. When model B is a rotation of model A (from `orthoformer rotate`), give
//! the rotation's kind and seed and the recovered map is compared with the true `Q`. The
//! flags become the library's [`AlignJob`], run by [`align::run`].

use std::path::PathBuf;

use super::Outcome;
use super::common::{emit, library_values};
use orthoformer::rotate::RotationKind;
use orthoformer::rotate::align::{self, AlignJob};
use orthoformer::rotate::options::AlignOptions;

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
    #[arg(long, value_parser = library_values(&RotationKind::NAMES, str::parse::<RotationKind>))]
    pub true_rotation: Option<RotationKind>,
    /// Seed of --true-rotation.
    #[arg(long, default_value_t = AlignOptions::default().seed)]
    pub seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

impl AlignArgs {
    /// The library's options these flags ask for.
    pub fn options(&self) -> AlignOptions {
        AlignOptions {
            layer: self.layer,
            max_tokens: self.max_tokens,
            context: self.context,
            true_rotation: self.true_rotation,
            seed: self.seed,
        }
    }
}

/// Runs `orthoformer align`.
pub fn run(args: &AlignArgs) -> anyhow::Result<Outcome> {
    let job = AlignJob {
        model: args.model.clone(),
        model_b: args.model_b.clone(),
        data: args.data.clone(),
        options: args.options(),
    };
    emit(&align::run(&job)?, args.json)?;
    Ok(Outcome::Success)
}
