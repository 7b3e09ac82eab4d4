//! What `orthoformer rotate` and `orthoformer align` do beyond their inputs and outputs: the
//! rotation, its check, and the alignment's text. Each `Default` holds its command's only
//! defaults.

use super::RotationKind;
use crate::io::gguf::GgmlType;

/// The options of `orthoformer rotate`.
#[derive(Clone, Debug, PartialEq)]
pub struct RotateOptions {
    /// The orthogonal matrix.
    pub rotation: RotationKind,
    /// Seed of the rotation (Haar draw or Hadamard signs).
    pub seed: u64,
    /// Also rotate every value head and undo it inside `o_proj` (QuaRot's `R2`, of the same
    /// kind, drawn from `seed + 2`).
    pub heads: bool,
    /// Tensor type of a GGUF output (F32 or F16).
    pub gguf_type: GgmlType,
    /// Tokens the logit check scores.
    pub check_tokens: usize,
    /// Window of the logit check; `None`: [`CHECK_WINDOW`], or the model's context when that
    /// is shorter. A window given is refused when it exceeds the model's context.
    pub context: Option<usize>,
    /// The check fails when max |Δlogit| exceeds this.
    pub tolerance: f64,
}

/// The logit check's window when none is given (clamped to the model's context).
pub const CHECK_WINDOW: usize = 128;

/// Tokens per forward chunk of a hidden-state alignment when none is given (clamped to the
/// model's context).
pub const ALIGN_CHUNK: usize = 256;

/// `context`, or `default` clamped to the model's context `max` when none is given.
pub fn window_or(context: Option<usize>, default: usize, max: usize) -> usize {
    context.unwrap_or(default.min(max))
}

impl Default for RotateOptions {
    /// A randomised Hadamard rotation from seed 0 (residual stream only) written as F32, checked on 256 tokens in
    /// windows of 128 to within 1e-2 of the original logits.
    fn default() -> Self {
        RotateOptions {
            rotation: RotationKind::Hadamard,
            seed: 0,
            heads: false,
            gguf_type: GgmlType::F32,
            check_tokens: 256,
            context: None,
            tolerance: 1e-2,
        }
    }
}

/// The names of the GGUF types a rotated model is written in, as [`gguf_type_named`] reads
/// them.
pub const GGUF_TYPE_NAMES: [&str; 2] = ["f32", "f16"];

/// The name of a rotated model's GGUF type (`f32`, `f16`; F32 for any other).
pub fn gguf_type_name(t: GgmlType) -> &'static str {
    if t == GgmlType::F16 { "f16" } else { "f32" }
}

/// The GGUF output type named `f32` or `f16` (the types a rotated model is written in).
pub fn gguf_type_named(name: &str) -> crate::Result<GgmlType> {
    match name {
        "f32" => Ok(GgmlType::F32),
        "f16" => Ok(GgmlType::F16),
        other => Err(crate::Error::Rotate(super::RotateError::Invalid(format!(
            "`gguf_type` {other:?}: use f32 or f16"
        )))),
    }
}

/// The options of `orthoformer align` (the layer has no default: it is required).
#[derive(Clone, Debug, PartialEq)]
pub struct AlignOptions {
    /// The residual stream after this many decoder layers (0: the embeddings).
    pub layer: usize,
    /// Tokens of text (hidden-state rows).
    pub max_tokens: usize,
    /// Tokens per forward chunk; `None`: [`ALIGN_CHUNK`], or the model's context when that
    /// is shorter.
    pub context: Option<usize>,
    /// Model B was made by `rotate` with this kind and [`AlignOptions::seed`]: compare the
    /// fitted map with that `Q`.
    pub true_rotation: Option<RotationKind>,
    /// Seed of `true_rotation`.
    pub seed: u64,
}

impl AlignOptions {
    /// The defaults at `layer`: 1,024 tokens in chunks of 256, no true rotation, seed 0.
    pub fn at_layer(layer: usize) -> Self {
        AlignOptions {
            layer,
            max_tokens: 1024,
            context: None,
            true_rotation: None,
            seed: 0,
        }
    }
}

impl Default for AlignOptions {
    /// [`AlignOptions::at_layer`] 0 (the embeddings).
    fn default() -> Self {
        AlignOptions::at_layer(0)
    }
}

/// The map of the residual stream `align --weights` fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResidualFit {
    /// Any orthogonal matrix (Procrustes).
    #[default]
    Rotation,
    /// A permutation of channels (weight matching, the subset of rotations Git Re-Basin
    /// uses).
    Permutation,
}

impl ResidualFit {
    /// The names [`str::parse`] takes.
    pub const NAMES: [&'static str; 2] = ["rotation", "permutation"];
}

impl std::fmt::Display for ResidualFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResidualFit::Rotation => "rotation",
            ResidualFit::Permutation => "permutation",
        })
    }
}

impl std::str::FromStr for ResidualFit {
    type Err = crate::Error;

    /// `rotation` or `permutation`; anything else names the `residual` field.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "rotation" => Ok(ResidualFit::Rotation),
            "permutation" => Ok(ResidualFit::Permutation),
            other => Err(crate::Error::Rotate(super::RotateError::Invalid(format!(
                "`residual` {other:?}: use rotation or permutation"
            )))),
        }
    }
}

/// The options of `orthoformer align --weights` (one library operation,
/// [`super::weight_align::run`]).
#[derive(Clone, Debug, PartialEq)]
pub struct WeightAlignOptions {
    /// The residual stream's map: a rotation, or only a permutation of channels.
    pub residual: ResidualFit,
    /// Also fit one rotation per value head, undone inside `o_proj` (QuaRot's `R2` form).
    pub heads: bool,
    /// Also match every layer's FFN units by a permutation (weight matching, Git Re-Basin).
    pub permute_ffn: bool,
    /// Rounds of alternating fits at most, when `heads` or `permute_ffn` is set (the
    /// residual rotation alone is one closed-form fit). Stops early when a round gains less
    /// than one part in 10⁹ of the distance.
    pub iterations: usize,
    /// Tensor type of a GGUF output (F32 or F16).
    pub gguf_type: GgmlType,
    /// Tokens the logit check scores (the aligned model against model B as loaded).
    pub check_tokens: usize,
    /// Window of the logit check (as [`RotateOptions::context`]).
    pub context: Option<usize>,
    /// The check fails when max |Δlogit| exceeds this.
    pub tolerance: f64,
    /// Model B was made from model A by `rotate` with this kind and
    /// [`WeightAlignOptions::seed`]: compare the fitted map with that `Qᵀ`.
    pub true_rotation: Option<RotationKind>,
    /// Seed of `true_rotation`.
    pub seed: u64,
}

impl Default for WeightAlignOptions {
    /// The residual rotation only (at most 8 alternating rounds when heads or FFN units are
    /// fitted too), written as F32, checked as `rotate` checks (256 tokens in windows of
    /// 128, within 1e-2).
    fn default() -> Self {
        let r = RotateOptions::default();
        WeightAlignOptions {
            residual: ResidualFit::Rotation,
            heads: false,
            permute_ffn: false,
            iterations: 8,
            gguf_type: r.gguf_type,
            check_tokens: r.check_tokens,
            context: r.context,
            tolerance: r.tolerance,
            true_rotation: None,
            seed: 0,
        }
    }
}
