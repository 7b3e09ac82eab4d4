//! A trained [`Gpt`] as a standard Hugging Face GPT-2 model (`GPT2LMHeadModel`):
//! `config.json` and `model.safetensors` under `transformers`' names.
//!
//! GPT-2 computes, per pre-LN block, `x += c_proj(attn(ln_1(x)))`, `x += mlp(ln_2(x))`, with
//! `Conv1D` layers (`y = x·W + b`, `W` stored `in x out`, the transpose of PyTorch's
//! `nn.Linear`), the three input projections fused as `c_attn = [W_Q | W_K | W_V]`
//! (`C x 3C`), scores scaled by `1/√D`, LayerNorm ε = 1e-5 with a bias, biases on every
//! projection, and the LM head tied to `wte`. This model is the same function when:
//! - blocks are pre-LN (post-LN has no GPT-2 form);
//! - attention is softmax (linear attention has none);
//! - a missing bias (`attn_bias`, `ffn_bias`, `norm_bias` false) is written as zeros;
//! - frozen `W_Q, W_K` are written as plain weights with their frozen values, tied keys as a
//!   copy of the queries (weight and bias), identity queries as the identity matrix with a zero
//!   bias, and a Hadamard projection as the dense matrix its fast transform equals (equal to
//!   float rounding, as any reordered matrix product);
//! - `gelu` tanh is `transformers`' `gelu_new`, exact is `gelu` (erf).
//!
//! A model whose `W_Q` or `W_K` is not trained (every exportable variant but softmax and
//! orthogonal-trained) also gets a marker in `config.json`, `"orthoformer": {"attention",
//! "frozen_method", "frozen_seed"}`: `transformers` ignores it (the frozen values load as
//! ordinary, trainable weights), and the Python package's `freeze_qk_` and `GPT.from_hf` read
//! it to freeze them again.
//!
//! Tensor names are those `save_pretrained` writes for `GPT2LMHeadModel` (`transformer.` then
//! `wte.weight`, `wpe.weight`, `h.{l}.ln_1.weight`, `h.{l}.attn.c_attn.weight`, ...); the tied
//! `lm_head.weight` is not stored, as there.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use crate::io::safetensors_writer::{TensorOut, to_bytes};
use crate::model::ModelError;
use crate::model::attention_kind::{AttnWeight, Projection};
use crate::model::config::{GptConfig, NormPlacement};
use crate::model::gpt::Gpt;
use crate::nn::gelu::Gelu;

/// One tensor of the GPT-2 model: name, shape, row-major values.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpt2Tensor {
    /// Name as `transformers` saves it (`transformer.h.0.attn.c_attn.weight`).
    pub name: String,
    /// Shape (`Conv1D` weights are `in x out`).
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub data: Vec<f32>,
}

/// Why `cfg` has no exact GPT-2 form, or `None` when it has one.
pub fn gpt2_incompatibility(cfg: &GptConfig) -> Option<String> {
    if let Some(layers) = &cfg.frozen_layers {
        return Some(format!(
            "Q/K are frozen in layers {layers:?} only (frozen_layers), which the export's \
             marker (one attention variant for every layer) cannot say"
        ));
    }
    if cfg.attention.is_linear() {
        return Some(format!(
            "attention {:?} is linear (kernel) attention, which GPT-2 has no form for; only \
             softmax-attention variants export",
            cfg.attention.name()
        ));
    }
    if cfg.position == crate::model::config::Position::Rope {
        return Some(
            "the model has rotary positions and GPT-2 learned ones; only --position learned \
             models export"
                .to_string(),
        );
    }
    if cfg.norm == NormPlacement::Post {
        return Some(
            "the model has post-LN blocks and GPT-2's are pre-LN; only pre-LN models export"
                .to_string(),
        );
    }
    None
}

/// `config.json` of the GPT-2 model (`GPT2Config` fields); an error when the model has no
/// GPT-2 form ([`gpt2_incompatibility`]).
pub fn gpt2_config(cfg: &GptConfig) -> Result<Json, ModelError> {
    if let Some(why) = gpt2_incompatibility(cfg) {
        return Err(ModelError::Config(format!("cannot export as GPT-2: {why}")));
    }
    let act = match cfg.gelu {
        Gelu::Tanh => "gelu_new",
        Gelu::Erf => "gelu",
    };
    let eps = shortest(crate::nn::layernorm::EPS);
    let p = shortest(cfg.dropout);
    let mut config = json!({
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": cfg.vocab_size,
        "n_positions": cfg.context,
        "n_ctx": cfg.context,
        "n_embd": cfg.d_model,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        "n_inner": cfg.d_ff,
        "activation_function": act,
        "resid_pdrop": p,
        "embd_pdrop": p,
        "attn_pdrop": p,
        "layer_norm_epsilon": eps,
        "initializer_range": 0.02,
        "scale_attn_weights": true,
        "scale_attn_by_inverse_layer_idx": false,
        "reorder_and_upcast_attn": false,
        "tie_word_embeddings": true,
        "use_cache": true,
        // GPT2Config defaults these to 50256, outside a small vocabulary; the tokenizers
        // trained here have no special tokens.
        "bos_token_id": null,
        "eos_token_id": null,
        "torch_dtype": "float32",
    });
    // A variant that fixes W_Q or W_K (frozen, tied or the identity) is marked; one that trains
    // both (softmax, orthogonal-trained) is a plain GPT-2.
    if cfg.attention.frozen_qk() {
        config["orthoformer"] = json!({
            "attention": cfg.attention.name(),
            "frozen_method": cfg.frozen_method.name(),
            "frozen_seed": cfg.frozen_seed,
        });
    }
    Ok(config)
}

/// An f32 as the f64 of its shortest decimal (1e-5, not 9.99999974e-6): PyTorch parses it
/// back to the same f32.
fn shortest(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// `w` (`rows x cols`, row-major) transposed.
fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; w.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = w[r * cols + c];
        }
    }
    t
}

/// The GPT-2 tensors of `model` in `save_pretrained` order (an error when it has no GPT-2
/// form). `c_attn.weight` is `C x 3C` with column blocks `W_Qᵀ, W_Kᵀ, W_Vᵀ`.
pub fn gpt2_tensors(model: &Gpt) -> crate::Result<Vec<Gpt2Tensor>> {
    let cfg = model.config();
    gpt2_config(cfg)?;
    // The GPT-2 tensors are a copy of the model (frozen values included) and the file a
    // second one; both must fit before either is built.
    let values = model.params().len().checked_add(model.frozen().len());
    crate::io::memory::check_fits(
        values.and_then(|n| crate::io::memory::bytes(&[n, 4, 2])),
        "the GPT-2 export (two copies of the weights)",
    )?;
    let (c, f) = (cfg.d_model, cfg.d_ff);
    let p = model.params();
    let frozen = model.frozen();
    let get = |name: &str| -> Option<&[f32]> {
        p.get(name).or_else(|| {
            frozen
                .tensors
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.data.as_slice())
        })
    };
    let need = |name: &str| -> crate::Result<Vec<f32>> {
        get(name)
            .map(<[f32]>::to_vec)
            .ok_or_else(|| ModelError::Checkpoint(format!("tensor {name} is missing")).into())
    };
    let or_zeros = |name: &str, n: usize| get(name).map_or_else(|| vec![0.0; n], <[f32]>::to_vec);
    let mut out = Vec::new();
    let mut push = |name: String, shape: Vec<usize>, data: Vec<f32>| {
        out.push(Gpt2Tensor {
            name: format!("transformer.{name}"),
            shape,
            data,
        });
    };
    push("wte.weight".into(), vec![cfg.vocab_size, c], need("wte")?);
    push("wpe.weight".into(), vec![cfg.context, c], need("wpe")?);
    let identity: Vec<f32> = (0..c * c)
        .map(|i| if i / c == i % c { 1.0 } else { 0.0 })
        .collect();
    for l in 0..cfg.n_layer {
        let h = |s: &str| format!("h.{l}.{s}");
        push(h("ln_1.weight"), vec![c], need(&h("ln1.weight"))?);
        push(h("ln_1.bias"), vec![c], or_zeros(&h("ln1.bias"), c));
        // W_Q, W_K, W_V as `out x in` (PyTorch) and their biases.
        let mut w: Vec<Vec<f32>> = Vec::with_capacity(3);
        let mut b: Vec<Vec<f32>> = Vec::with_capacity(3);
        for which in [AttnWeight::Q, AttnWeight::K, AttnWeight::V] {
            let (name, proj) = (which.name(), cfg.layer_kind(l).projection(which));
            let (wi, bi) = match proj {
                Projection::Identity => (identity.clone(), vec![0.0; c]),
                Projection::TiedToQ => (w[0].clone(), b[0].clone()),
                _ => (
                    need(&h(&format!("attn.{name}.weight")))?,
                    or_zeros(&h(&format!("attn.{name}.bias")), c),
                ),
            };
            w.push(wi);
            b.push(bi);
        }
        // c_attn (`C x 3C`): row i is input i; columns 0..C are W_Q's outputs, then K, then V.
        let mut c_attn = vec![0.0f32; c * 3 * c];
        for (k, wk) in w.iter().enumerate() {
            for o in 0..c {
                for i in 0..c {
                    c_attn[i * 3 * c + k * c + o] = wk[o * c + i];
                }
            }
        }
        push(h("attn.c_attn.weight"), vec![c, 3 * c], c_attn);
        push(h("attn.c_attn.bias"), vec![3 * c], b.concat());
        let wo = need(&h("attn.o.weight"))?;
        push(h("attn.c_proj.weight"), vec![c, c], transpose(&wo, c, c));
        push(
            h("attn.c_proj.bias"),
            vec![c],
            or_zeros(&h("attn.o.bias"), c),
        );
        push(h("ln_2.weight"), vec![c], need(&h("ln2.weight"))?);
        push(h("ln_2.bias"), vec![c], or_zeros(&h("ln2.bias"), c));
        let fc = need(&h("mlp.fc.weight"))?;
        push(h("mlp.c_fc.weight"), vec![c, f], transpose(&fc, f, c));
        push(h("mlp.c_fc.bias"), vec![f], or_zeros(&h("mlp.fc.bias"), f));
        let proj = need(&h("mlp.proj.weight"))?;
        push(h("mlp.c_proj.weight"), vec![f, c], transpose(&proj, c, f));
        push(
            h("mlp.c_proj.bias"),
            vec![c],
            or_zeros(&h("mlp.proj.bias"), c),
        );
    }
    push("ln_f.weight".into(), vec![c], need("ln_f.weight")?);
    push("ln_f.bias".into(), vec![c], or_zeros("ln_f.bias", c));
    Ok(out)
}

/// `model.safetensors` of the GPT-2 model (F32; metadata `format: pt`, as `save_pretrained`).
pub fn gpt2_safetensors(model: &Gpt) -> crate::Result<Vec<u8>> {
    let tensors = gpt2_tensors(model)?;
    let outs: Vec<TensorOut<'_>> = tensors
        .iter()
        .map(|t| TensorOut {
            name: &t.name,
            shape: &t.shape,
            data: &t.data,
        })
        .collect();
    let meta = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    to_bytes(&outs, &meta).map_err(|e| crate::Error::io("model.safetensors", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AttentionKind;

    #[test]
    fn models_with_untrained_projections_are_marked_with_their_generator() {
        let mut cfg = GptConfig::preset("tiny").unwrap();
        assert!(gpt2_config(&cfg).unwrap().get("orthoformer").is_none());
        cfg.attention = AttentionKind::Orthogonal;
        cfg.frozen_seed = 7;
        let marker = &gpt2_config(&cfg).unwrap()["orthoformer"];
        assert_eq!(marker["attention"], "orthogonal");
        assert_eq!(marker["frozen_method"], cfg.frozen_method.name());
        assert_eq!(marker["frozen_seed"], 7);
        // Identity queries are not trained either: marked too.
        cfg.attention = AttentionKind::IdentityQ;
        assert_eq!(
            gpt2_config(&cfg).unwrap()["orthoformer"]["attention"],
            "identity-q"
        );
        // Trained Q/K started at the frozen draw are plain GPT-2 weights: no marker.
        cfg.attention = AttentionKind::OrthogonalTrained;
        assert!(gpt2_config(&cfg).unwrap().get("orthoformer").is_none());
    }
}
