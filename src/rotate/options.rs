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
    /// Window of the logit check.
    pub context: usize,
    /// The check fails when max |Δlogit| exceeds this.
    pub tolerance: f64,
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
            context: 128,
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
    /// Tokens per forward chunk.
    pub context: usize,
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
            context: 256,
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
