//! `orthoformer align`: orthogonal Procrustes between two models, either on their hidden
//! states at one layer on the same text (`--layer`), or on their weights (`--weights`: the
//! exact symmetries that bring model B closest to model A, applied to B and written with
//! `--out`). When model B is a rotation of model A (from `orthoformer rotate`), give the
//! rotation's kind and seed and the recovered map is compared with the true `Q`. The flags
//! become the library's [`AlignJob`] or [`WeightAlignJob`].

use std::path::PathBuf;

use super::Outcome;
use super::common::{LazyBar, emit, library_values};
use orthoformer::io::gguf::GgmlType;
use orthoformer::rotate::RotationKind;
use orthoformer::rotate::align::{self, AlignJob};
use orthoformer::rotate::options::{
    AlignOptions, GGUF_TYPE_NAMES, ResidualFit, WeightAlignOptions, gguf_type_name, gguf_type_named,
};
use orthoformer::rotate::weight_align::{self, AlignPhase, WeightAlignJob};

/// Flags of `orthoformer align`.
#[derive(Debug, clap::Args)]
pub struct AlignArgs {
    /// Model A (`.gguf` or Hugging Face folder): the reference.
    #[arg(long)]
    pub model: PathBuf,
    /// Model B, of the same width and tokenizer: the one mapped onto A.
    #[arg(long)]
    pub model_b: PathBuf,
    /// Text whose hidden states are aligned, or (--weights) on which the aligned model is
    /// checked [default: the embedded TinyShakespeare].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Layer: the residual stream after this many decoder layers (0 = embeddings).
    #[arg(long, required_unless_present = "weights")]
    pub layer: Option<usize>,
    /// Tokens of text (hidden-state rows); needs at least the width for a well-posed fit.
    #[arg(long, default_value_t = AlignOptions::default().max_tokens)]
    pub max_tokens: usize,
    /// Tokens per forward chunk (the model's attention window here) [default: 256]; with
    /// --weights, the window of the check [default: 128]; either default is cut to the
    /// model's context when that is shorter.
    #[arg(long)]
    pub context: Option<usize>,
    /// Align the weights instead of hidden states: fold both models' norms, fit the residual
    /// rotation minimising ‖A − B·R‖ over every matrix, apply it to B (function unchanged,
    /// checked on --data) and write it with --out.
    #[arg(long)]
    pub weights: bool,
    /// Where to write the aligned B (--weights): `.gguf` writes a GGUF file, anything else a
    /// Hugging Face folder; repeat for both. Written only when the check passes.
    #[arg(long, requires = "weights")]
    pub out: Vec<PathBuf>,
    /// The residual stream's map (--weights): any rotation, or only a permutation of
    /// channels (Git Re-Basin's weight matching).
    #[arg(long, default_value_t = WeightAlignOptions::default().residual, value_parser = library_values(&ResidualFit::NAMES, str::parse::<ResidualFit>), requires = "weights")]
    pub residual: ResidualFit,
    /// Also fit one rotation per value head, undone inside o_proj (--weights).
    #[arg(long, requires = "weights")]
    pub heads: bool,
    /// Also match each layer's FFN units by a permutation (weight matching; --weights).
    #[arg(long, requires = "weights")]
    pub permute_ffn: bool,
    /// Alternating rounds at most with --heads or --permute-ffn.
    #[arg(long, default_value_t = WeightAlignOptions::default().iterations, requires = "weights")]
    pub iterations: usize,
    /// Tensor type of a GGUF output: f32 (exact) or f16.
    #[arg(long, default_value = gguf_type_name(WeightAlignOptions::default().gguf_type), value_parser = library_values(&GGUF_TYPE_NAMES, gguf_type_named), requires = "weights")]
    pub gguf_type: GgmlType,
    /// Tokens on which the aligned model is checked against B (--weights).
    #[arg(long, default_value_t = WeightAlignOptions::default().check_tokens, requires = "weights")]
    pub check_tokens: usize,
    /// The check fails (exit 1, nothing written) when max |Δlogit| exceeds this.
    #[arg(long, default_value_t = WeightAlignOptions::default().tolerance, requires = "weights")]
    pub tolerance: f64,
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
    /// The library's options of a hidden-state alignment.
    pub fn options(&self) -> AlignOptions {
        AlignOptions {
            layer: self.layer.unwrap_or_default(),
            max_tokens: self.max_tokens,
            context: self.context,
            true_rotation: self.true_rotation,
            seed: self.seed,
        }
    }

    /// The library's options of a weight alignment.
    pub fn weight_options(&self) -> WeightAlignOptions {
        WeightAlignOptions {
            residual: self.residual,
            heads: self.heads,
            permute_ffn: self.permute_ffn,
            iterations: self.iterations,
            gguf_type: self.gguf_type,
            check_tokens: self.check_tokens,
            tolerance: self.tolerance,
            context: self.context,
            true_rotation: self.true_rotation,
            seed: self.seed,
        }
    }
}

/// Runs `orthoformer align`.
pub fn run(args: &AlignArgs) -> anyhow::Result<Outcome> {
    if args.weights {
        return run_weights(args);
    }
    let job = AlignJob {
        model: args.model.clone(),
        model_b: args.model_b.clone(),
        data: args.data.clone(),
        options: args.options(),
    };
    emit(&align::run(&job)?, args.json)?;
    Ok(Outcome::Success)
}

/// Runs `orthoformer align --weights`, with a bar for the fits and one for the check.
fn run_weights(args: &AlignArgs) -> anyhow::Result<Outcome> {
    // Checked here, not by clap: a `conflicts_with` on these would switch off the
    // `requires = "weights"` of the --weights flags (clap 4.6).
    if args.layer.is_some() || args.max_tokens != AlignOptions::default().max_tokens {
        anyhow::bail!(
            "--layer and --max-tokens choose hidden states; --weights aligns the weights \
             instead: give one or the other"
        );
    }
    let job = WeightAlignJob {
        model: args.model.clone(),
        model_b: args.model_b.clone(),
        out: args.out.clone(),
        data: args.data.clone(),
        options: args.weight_options(),
    };
    let (mut fit, mut check) = (
        Some(LazyBar::new("fit", args.json)),
        LazyBar::new("check", args.json),
    );
    let report = weight_align::run(&job, &mut |phase, done, total| match phase {
        AlignPhase::Fit => {
            if let Some(b) = fit.as_mut() {
                b.set(done, total);
            }
        }
        AlignPhase::Check => {
            if let Some(b) = fit.take() {
                b.finish();
            }
            check.set(done, total);
        }
    });
    if let Some(b) = fit {
        b.finish();
    }
    check.finish();
    let report = report?;
    emit(&report, args.json)?;
    Ok(if report.check_passed {
        Outcome::Success
    } else {
        Outcome::CheckFailed
    })
}
