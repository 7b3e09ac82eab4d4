//! The shape of a Llama-architecture model, from GGUF metadata or a Hugging Face `config.json`.

use serde::{Deserialize, Serialize};

use super::fields::Fields;
use super::supported;
use crate::io::gguf::{GgufFile, keys};
use crate::model::ModelError;

/// The model families the engine runs: both are the Llama decoder; Qwen2 adds biases to the
/// query, key and value projections (not to the output projection), and its GGUF files keep
/// Hugging Face's half-split RoPE order (llama.cpp's NEOX RoPE) instead of permuting Q/K rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Family {
    /// Llama (and Mistral without a sliding window): no biases.
    #[default]
    Llama,
    /// Qwen2 / Qwen2.5: q/k/v biases.
    Qwen2,
}

impl Family {
    /// The GGUF `general.architecture` (and metadata key prefix).
    pub fn gguf_arch(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
        }
    }

    /// Whether q/k/v carry biases.
    pub fn qkv_bias(self) -> bool {
        self == Family::Qwen2
    }
}

/// Hyperparameters of a Llama-style decoder (pre-norm RMSNorm, RoPE, GQA, SwiGLU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    /// `V`: vocabulary size.
    pub vocab_size: usize,
    /// `C`: residual width.
    pub d_model: usize,
    /// `L`: number of decoder layers.
    pub n_layer: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention: `n_head` is a multiple).
    pub n_kv_head: usize,
    /// `F`: SwiGLU hidden width.
    pub d_ff: usize,
    /// RoPE base θ.
    pub rope_theta: f64,
    /// RMSNorm ε.
    pub rms_eps: f64,
    /// Longest context the model was trained for.
    pub max_context: usize,
    /// Llama or Qwen2 (q/k/v biases).
    #[serde(default)]
    pub family: Family,
}

impl LlamaConfig {
    /// `D`: head width, `d_model / n_head`.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_head
    }

    /// Checks that the numbers fit together.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |m: String| Err(ModelError::Config(m));
        if self.vocab_size == 0 || self.d_model == 0 || self.n_layer == 0 || self.d_ff == 0 {
            return bad(format!("zero-sized dimension in {self:?}"));
        }
        if self.n_head == 0 || !self.d_model.is_multiple_of(self.n_head) {
            return bad(format!(
                "d_model {} is not a multiple of n_head {}",
                self.d_model, self.n_head
            ));
        }
        if self.n_kv_head == 0 || !self.n_head.is_multiple_of(self.n_kv_head) {
            return bad(format!(
                "n_head {} is not a multiple of n_kv_head {}",
                self.n_head, self.n_kv_head
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return bad(format!(
                "head width {} is odd (RoPE needs pairs)",
                self.head_dim()
            ));
        }
        // Sizes a real model never exceeds; beyond them a file is lying, and we must not allocate.
        if self.vocab_size > 1 << 22
            || self.d_model > 1 << 16
            || self.d_ff > 1 << 18
            || self.n_layer > 1024
        {
            return bad(format!("implausibly large model dimensions {self:?}"));
        }
        if self.rope_theta.is_nan()
            || self.rope_theta <= 0.0
            || self.rms_eps.is_nan()
            || self.rms_eps < 0.0
        {
            return bad("rope_theta must be positive and rms_eps non-negative".into());
        }
        Ok(())
    }

    /// Reads the configuration from a GGUF file's `llama.*` (or `qwen2.*`) metadata, every
    /// key of which is read by type or refused by name (`fields::Fields`).
    pub fn from_gguf(g: &GgufFile) -> crate::Result<Self> {
        let arch = g.get_str(keys::ARCHITECTURE)?;
        let family = match arch {
            "llama" => Family::Llama,
            "qwen2" => Family::Qwen2,
            _ => {
                return Err(ModelError::Config(format!(
                    "{}: architecture {arch:?} is not supported (only llama and qwen2)",
                    g.path.display()
                ))
                .into());
            }
        };
        let f = Fields::gguf(&g.metadata, arch, &g.path.display().to_string());
        let vocab_size = match f.int(keys::VOCAB_SIZE)? {
            Some(v) => size(v),
            None => g
                .get(keys::TOKENIZER_TOKENS)
                .and_then(|v| v.as_array())
                .map_or(0, |a| a.len()),
        };
        let n_head = size(f.req_int(keys::HEAD_COUNT)?);
        let cfg = LlamaConfig {
            vocab_size,
            d_model: size(f.req_int(keys::EMBEDDING_LENGTH)?),
            n_layer: size(f.req_int(keys::BLOCK_COUNT)?),
            n_head,
            n_kv_head: f.int(keys::HEAD_COUNT_KV)?.map_or(n_head, size),
            d_ff: size(f.req_int(keys::FEED_FORWARD_LENGTH)?),
            rope_theta: f.float(keys::ROPE_FREQ_BASE)?.unwrap_or(10000.0),
            rms_eps: f.float(keys::RMS_EPS)?.unwrap_or(1e-5),
            max_context: f.int(keys::CONTEXT_LENGTH)?.map_or(2048, size),
            family,
        };
        cfg.validate()?;
        super::supported::check_gguf(g, &f, &cfg)?;
        Ok(cfg)
    }

    /// Reads a Hugging Face `config.json` (`LlamaForCausalLM`, `MistralForCausalLM`,
    /// `Qwen2ForCausalLM`), every field of which is read by type, honoured, or refused by name
    /// (`fields::Fields`, `supported.rs`). Returns the configuration and whether the word
    /// embeddings are tied.
    pub fn from_hf_json(text: &str) -> Result<(Self, bool), ModelError> {
        let raw: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| ModelError::Config(format!("config.json: {e}")))?;
        let f = Fields::json(&raw, "config.json")?;
        let family = supported::hf_family(&f)?;
        let n_head = size(f.req_int("num_attention_heads")?);
        let cfg = LlamaConfig {
            vocab_size: size(f.req_int("vocab_size")?),
            d_model: size(f.req_int("hidden_size")?),
            n_layer: size(f.req_int("num_hidden_layers")?),
            n_head,
            n_kv_head: f.int("num_key_value_heads")?.map_or(n_head, size),
            d_ff: size(f.req_int("intermediate_size")?),
            rope_theta: supported::hf_rope_theta(&f)?,
            rms_eps: f.float("rms_norm_eps")?.unwrap_or(1e-6),
            max_context: f.int("max_position_embeddings")?.map_or(2048, size),
            family,
        };
        let tied = f.boolean("tie_word_embeddings")?.unwrap_or(false);
        cfg.validate()?;
        supported::check_hf_config(&f, &cfg)?;
        Ok((cfg, tied))
    }

    /// A Hugging Face `config.json` for this model.
    pub fn to_hf_json(&self, tied: bool) -> serde_json::Value {
        let (arch, model_type) = match self.family {
            Family::Llama => ("LlamaForCausalLM", "llama"),
            Family::Qwen2 => ("Qwen2ForCausalLM", "qwen2"),
        };
        let mut v = serde_json::json!({
            "architectures": [arch],
            "model_type": model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.d_model,
            "num_hidden_layers": self.n_layer,
            "num_attention_heads": self.n_head,
            "num_key_value_heads": self.n_kv_head,
            "intermediate_size": self.d_ff,
            "rope_theta": self.rope_theta,
            "rms_norm_eps": self.rms_eps,
            "max_position_embeddings": self.max_context,
            "hidden_act": "silu",
            "tie_word_embeddings": tied,
            "torch_dtype": "float32",
        });
        if self.family == Family::Qwen2 {
            v["use_sliding_window"] = false.into();
        }
        v
    }
}

/// A count read from a file as a `usize`; one beyond it saturates, for `validate` to refuse.
fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
