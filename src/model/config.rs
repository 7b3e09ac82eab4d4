//! `GptConfig`: the shape of a GPT language model, its attention variant and norm placement,
//! with named presets, TOML loading (unknown fields rejected) and validation.

use super::ModelError;
use crate::init::frozen_draw::FrozenDraw;
use crate::init::orthogonal::OrthoMethod;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub(crate) use super::attention_kind::{AttentionKind, Projection};

/// Where the LayerNorms sit in a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NormPlacement {
    /// `LN(x + f(x))`, as the seed's code (and the original transformer).
    Post,
    /// `x + f(LN(x))`, as GPT-2.
    Pre,
}

/// How the model sees positions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Position {
    /// A learned absolute position embedding `wpe` added to the token embedding (GPT-2).
    #[default]
    Learned,
    /// Rotary position embeddings on every head's queries and keys after their projection
    /// (`nn::rope`, Hugging Face's half-split pairs, θ = 10,000), no `wpe`: the scores of
    /// frozen Q/K then depend on relative position.
    Rope,
}

impl Position {
    /// Every value, in the order the names are listed.
    pub const ALL: [Position; 2] = [Position::Learned, Position::Rope];

    /// Parses a command-line name (see [`Position::name`]).
    pub fn parse(s: &str) -> Result<Self, ModelError> {
        parse_name(&Self::ALL, Self::name, "position", s)
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Position::Learned => "learned",
            Position::Rope => "rope",
        }
    }

    fn is_learned(&self) -> bool {
        *self == Position::Learned
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether attention scores get a trained per-head temperature.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Temperature {
    /// Scores `q·k/√D` as they are.
    #[default]
    Fixed,
    /// Scores `τ_h·q·k/√D` with one trained scalar `τ_h` per head (starting at 1): with frozen
    /// `W_Q, W_K` the only trained part of the score path, letting a head sharpen or flatten
    /// its attention. Softmax-kernel variants only.
    Learned,
}

impl Temperature {
    /// Every value, in the order the names are listed.
    pub const ALL: [Temperature; 2] = [Temperature::Fixed, Temperature::Learned];

    /// Parses a command-line name (see [`Temperature::name`]).
    pub fn parse(s: &str) -> Result<Self, ModelError> {
        parse_name(&Self::ALL, Self::name, "temperature", s)
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Temperature::Fixed => "fixed",
            Temperature::Learned => "learned",
        }
    }

    fn is_fixed(&self) -> bool {
        *self == Temperature::Fixed
    }
}

impl std::fmt::Display for Temperature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The value among `all` whose `name` is `s`, or an error naming `what` and every name.
fn parse_name<T: Copy>(
    all: &[T],
    name: fn(T) -> &'static str,
    what: &str,
    s: &str,
) -> Result<T, ModelError> {
    all.iter().copied().find(|&v| name(v) == s).ok_or_else(|| {
        let names: Vec<_> = all.iter().map(|&v| name(v)).collect();
        ModelError::Config(format!("unknown {what} {s:?}: use {}", names.join(" or ")))
    })
}

/// RoPE's base θ.
pub const ROPE_THETA: f64 = 10_000.0;

/// The shape and variant of a GPT language model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GptConfig {
    /// Vocabulary size `V`.
    pub vocab_size: usize,
    /// Longest sequence `T` (rows of the position embedding).
    pub context: usize,
    /// Number of blocks `L`.
    pub n_layer: usize,
    /// Heads per attention `H`; `d_model` must be divisible by it.
    pub n_head: usize,
    /// Model width `C`.
    pub d_model: usize,
    /// Feed-forward width `F` (GPT-2: `4C`).
    pub d_ff: usize,
    /// Attention variant of every layer.
    pub attention: AttentionKind,
    /// Pre- or post-LN blocks.
    pub norm: NormPlacement,
    /// Biases on Q, K, V, O projections.
    pub attn_bias: bool,
    /// Biases on the two feed-forward projections.
    pub ffn_bias: bool,
    /// Biases (`β`) in the LayerNorms; `false` is nanoGPT's `bias=False` (`γ` only).
    /// Configurations written before this field existed had them, hence the default.
    #[serde(default = "norm_bias_default")]
    pub norm_bias: bool,
    /// The feed-forward activation: GPT-2's tanh GELU (the default, and the form of
    /// configurations written before this field existed) or the exact erf GELU (nanoGPT's).
    #[serde(default)]
    pub gelu: crate::nn::gelu::Gelu,
    /// Dropout probability on the embedding output and on each residual branch; `0` disables.
    pub dropout: f32,
    /// How the frozen `W_Q, W_K` blocks are drawn: an orthogonal method (`qr`, `svd`,
    /// `householder`, `cayley`) or `gaussian` (i.i.d. `N(0, 1/C)`, not orthogonal: the
    /// equal-scale control).
    pub frozen_method: FrozenDraw,
    /// Base seed of the frozen weights (each head's seed is derived from it).
    pub frozen_seed: u64,
    /// Learned absolute positions (the default, and the form of configurations written
    /// before this field existed; not written when learned) or rotary.
    #[serde(default, skip_serializing_if = "Position::is_learned")]
    pub position: Position,
    /// A trained per-head temperature on the attention scores (default fixed, not written
    /// when fixed).
    #[serde(default, skip_serializing_if = "Temperature::is_fixed")]
    pub temperature: Temperature,
    /// The layers (ascending, 0-based) that use the variant's `W_Q, W_K`; the others train
    /// theirs as its trained counterpart does (`model::frozen_layers`). `None` (not written)
    /// is every layer, the form of configurations written before the field existed.
    /// Variants that train Q/K (softmax, linear) are the same model whatever it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen_layers: Option<Vec<usize>>,
}

fn norm_bias_default() -> bool {
    true
}

impl GptConfig {
    /// Preset names accepted by [`GptConfig::preset`].
    pub const PRESETS: [&'static str; 6] = [
        "tiny",
        "seed-003",
        "gpt2-small",
        "config-a",
        "config-b",
        "shakespeare-char",
    ];

    fn base(
        vocab_size: usize,
        context: usize,
        n_layer: usize,
        n_head: usize,
        d_model: usize,
    ) -> Self {
        GptConfig {
            vocab_size,
            context,
            n_layer,
            n_head,
            d_model,
            d_ff: 4 * d_model,
            attention: AttentionKind::Softmax,
            norm: NormPlacement::Pre,
            attn_bias: false,
            ffn_bias: true,
            norm_bias: true,
            gelu: crate::nn::gelu::Gelu::Tanh,
            dropout: 0.0,
            frozen_method: FrozenDraw::Orthogonal(OrthoMethod::Qr),
            frozen_seed: 0,
            position: Position::Learned,
            temperature: Temperature::Fixed,
            frozen_layers: None,
        }
    }

    /// A named preset (see [`GptConfig::PRESETS`]); attention defaults to softmax.
    pub fn preset(name: &str) -> Result<Self, ModelError> {
        let cfg = match name {
            // Small enough for fast exact tests, big enough to exercise every shape rule.
            "tiny" => GptConfig {
                d_ff: 32,
                attn_bias: true,
                ..Self::base(11, 8, 2, 2, 8)
            },
            "seed-003" => GptConfig {
                norm: NormPlacement::Post,
                ..Self::base(50_257, 1024, 12, 12, 768)
            },
            "gpt2-small" => GptConfig {
                attn_bias: true,
                ..Self::base(50_257, 1024, 12, 12, 768)
            },
            "config-a" => Self::base(65, 128, 4, 4, 128),
            "config-b" => Self::base(65, 256, 6, 6, 384),
            "shakespeare-char" => Self::base(65, 128, 4, 4, 128),
            _ => {
                return Err(ModelError::Config(format!(
                    "unknown preset {name:?}: use one of {}",
                    Self::PRESETS.join(", ")
                )));
            }
        };
        Ok(cfg)
    }

    /// Parses a TOML config (every field required, unknown fields rejected) and validates it.
    pub fn from_toml_str(text: &str) -> Result<Self, ModelError> {
        let cfg: GptConfig = toml::from_str(text)
            .map_err(|e| ModelError::Config(format!("bad TOML config: {}", e.message())))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads a TOML config file, see [`GptConfig::from_toml_str`].
    pub fn from_toml_file(path: &Path) -> crate::Result<Self> {
        let text = crate::io::safe_file::read_regular_text(path)?;
        Self::from_toml_str(&text).map_err(|e| {
            ModelError::Config(format!(
                "{}: {}",
                path.display(),
                e.to_string()
                    .trim_start_matches("invalid model configuration: ")
            ))
            .into()
        })
    }

    /// Reads a config file: JSON when the name ends in `.json` (the form checkpoints store),
    /// TOML otherwise; every field required, unknown fields rejected, validated.
    pub fn from_file(path: &Path) -> crate::Result<Self> {
        if path.extension().is_none_or(|e| e != "json") {
            return Self::from_toml_file(path);
        }
        let text = crate::io::safe_file::read_regular_text(path)?;
        let cfg: GptConfig = serde_json::from_str(&text)
            .map_err(|e| ModelError::Config(format!("{}: bad JSON config: {e}", path.display())))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The config as TOML text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Head width `D = C / H`.
    pub fn d_head(&self) -> usize {
        self.d_model / self.n_head.max(1)
    }

    /// Checks every field; the error says which one and what to do.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |s: String| Err(ModelError::Config(s));
        for (name, v) in [
            ("vocab_size", self.vocab_size),
            ("context", self.context),
            ("n_layer", self.n_layer),
            ("n_head", self.n_head),
            ("d_model", self.d_model),
            ("d_ff", self.d_ff),
        ] {
            if v == 0 {
                return bad(format!("{name} is 0: it must be at least 1"));
            }
        }
        if !self.d_model.is_multiple_of(self.n_head) {
            return bad(format!(
                "d_model {} is not divisible by n_head {}: choose d_model = n_head x head width",
                self.d_model, self.n_head
            ));
        }
        if self.vocab_size > u32::MAX as usize {
            return bad(format!(
                "vocab_size {} does not fit token ids of 32 bits",
                self.vocab_size
            ));
        }
        if self.attention == AttentionKind::OrthogonalHadamard
            && crate::nn::hadamard::factors(self.d_model).is_none()
        {
            return bad(format!(
                "orthogonal-hadamard needs a Hadamard matrix of order d_model = {}: use a power \
                 of two, or 12, 20, 24, ... times one (e.g. 384 = 12·32)",
                self.d_model
            ));
        }
        if self.position == Position::Rope && !self.d_head().is_multiple_of(2) {
            return bad(format!(
                "rope rotates pairs of a head's dimensions: head width {} (d_model / n_head) \
                 must be even",
                self.d_head()
            ));
        }
        if self.temperature == Temperature::Learned && self.attention.is_linear() {
            return bad(format!(
                "a learned temperature scales softmax scores, and {} is linear attention: use \
                 a softmax variant or --temperature fixed",
                self.attention.name()
            ));
        }
        super::frozen_layers::check(self.frozen_layers.as_deref(), self.n_layer)?;
        if !(0.0..1.0).contains(&self.dropout) {
            return bad(format!("dropout {} must be in [0, 1)", self.dropout));
        }
        // Every size derived from the config (tensor shapes, counts, the bytes of weights,
        // gradients, AdamW moments and a checkpoint write: at most 32 per parameter) must be
        // computable in 64 bits; whether it fits the machine is checked where it is allocated.
        let counts = super::gpt::layout::param_counts(self);
        let bytes = counts.and_then(|c| {
            let params = c.trainable.checked_add(c.frozen)?;
            params.checked_mul(32)
        });
        if bytes.is_none() {
            return bad(format!(
                "the model's size overflows 64-bit arithmetic (vocab_size {}, context {}, \
                 n_layer {}, d_model {}, d_ff {}): use smaller dimensions",
                self.vocab_size, self.context, self.n_layer, self.d_model, self.d_ff
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_strangers_are_refused_with_the_names() {
        for p in Position::ALL {
            assert_eq!(Position::parse(p.name()).unwrap(), p);
        }
        for t in Temperature::ALL {
            assert_eq!(Temperature::parse(t.name()).unwrap(), t);
        }
        let e = Position::parse("alibi").unwrap_err().to_string();
        assert!(
            e.contains("unknown position \"alibi\": use learned or rope"),
            "{e}"
        );
        let e = Temperature::parse("Learned").unwrap_err().to_string();
        assert!(e.contains("use fixed or learned"), "{e}");
    }
}
