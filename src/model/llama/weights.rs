//! The weights of a Llama-style model in f32, Hugging Face orientation: every linear is stored
//! `out x in`, row-major, so `y = W·x`. Loaded from GGUF (dequantised, Q/K rows un-permuted
//! from llama.cpp's adjacent-pair RoPE order) or from `model.safetensors` (or its shards);
//! saved as either.

use super::config::{Family, LlamaConfig};
use super::layer_tensor::LayerTensor as T;
use super::tensor_names::{Scheme, check_all_read};
use crate::io::gguf::{GgufFile, keys};
use crate::model::ModelError;

/// The biases of the query, key and value projections (Qwen2), added after the products and
/// before RoPE; in Hugging Face row order like the weights.
#[derive(Debug, Clone, PartialEq)]
pub struct QkvBias {
    /// `H·D`.
    pub q: Vec<f32>,
    /// `K·D`.
    pub k: Vec<f32>,
    /// `K·D`.
    pub v: Vec<f32>,
}

impl QkvBias {
    /// Adds the biases to every row of `q`, `k` and `v` (`T x H·D`, `T x K·D`, `T x K·D`).
    pub fn add(&self, q: &mut [f32], k: &mut [f32], v: &mut [f32]) {
        for (x, b) in [(q, &self.q), (k, &self.k), (v, &self.v)] {
            for row in x.chunks_exact_mut(b.len()) {
                for (a, &c) in row.iter_mut().zip(b) {
                    *a += c;
                }
            }
        }
    }
}

/// One decoder layer. Shapes: `C` width, `H·D` query width, `K·D` key/value width, `F` FFN.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    /// RMSNorm weight before attention (`C`).
    pub attn_norm: Vec<f32>,
    /// Query projection (`H·D x C`).
    pub wq: Vec<f32>,
    /// Key projection (`K·D x C`).
    pub wk: Vec<f32>,
    /// Value projection (`K·D x C`).
    pub wv: Vec<f32>,
    /// Attention output projection (`C x H·D`).
    pub wo: Vec<f32>,
    /// RMSNorm weight before the FFN (`C`).
    pub ffn_norm: Vec<f32>,
    /// SwiGLU gate (`F x C`).
    pub w_gate: Vec<f32>,
    /// SwiGLU up (`F x C`).
    pub w_up: Vec<f32>,
    /// SwiGLU down (`C x F`).
    pub w_down: Vec<f32>,
    /// q/k/v biases (Qwen2), `None` for Llama.
    pub qkv_bias: Option<QkvBias>,
}

/// All weights of a model.
#[derive(Debug, Clone)]
pub struct LlamaWeights {
    /// The shape.
    pub cfg: LlamaConfig,
    /// Token embedding (`V x C`).
    pub embed: Vec<f32>,
    /// Decoder layers.
    pub layers: Vec<LayerWeights>,
    /// Final RMSNorm weight (`C`).
    pub final_norm: Vec<f32>,
    /// Output projection (`V x C`); `None` when tied to `embed`.
    pub lm_head: Option<Vec<f32>>,
}

/// Reorders the rows of a Q or K weight between llama.cpp's adjacent-pair RoPE layout and
/// Hugging Face's rotate-half layout. Within each head of `dh` rows, HF row `s·dh/2 + i`
/// (`s ∈ {0,1}`) is GGUF row `2i + s`. `to_hf` picks the direction.
pub fn permute_rope_rows(
    w: &[f32],
    n_heads: usize,
    dh: usize,
    cols: usize,
    to_hf: bool,
) -> Vec<f32> {
    let mut out = vec![0.0; w.len()];
    let half = dh / 2;
    for h in 0..n_heads {
        for s in 0..2 {
            for i in 0..half {
                let hf = h * dh + s * half + i;
                let gg = h * dh + 2 * i + s;
                let (dst, src) = if to_hf { (hf, gg) } else { (gg, hf) };
                out[dst * cols..(dst + 1) * cols].copy_from_slice(&w[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

impl LlamaWeights {
    /// The output projection, whether tied or not.
    pub fn lm_head(&self) -> &[f32] {
        self.lm_head.as_deref().unwrap_or(&self.embed)
    }

    /// Loads and dequantises a Llama GGUF file (refusing one written for an online
    /// transform these weights would lose, [`super::online::refuse_owned`]).
    pub fn from_gguf(g: &GgufFile) -> crate::Result<Self> {
        let cfg = LlamaConfig::from_gguf(g)?;
        super::online::refuse_owned(g)?;
        let (c, v, f) = (cfg.d_model as u64, cfg.vocab_size as u64, cfg.d_ff as u64);
        let dh = cfg.head_dim();
        let kv = (cfg.n_kv_head * dh) as u64;
        let embed = g.tensor_f32(keys::TOKEN_EMBD, &[c, v])?;
        let mut layers = Vec::with_capacity(cfg.n_layer);
        // llama.cpp permutes Llama's Q/K rows for its adjacent-pair RoPE; Qwen2 files keep
        // Hugging Face's order (NEOX RoPE).
        let interleaved = cfg.family == Family::Llama;
        for l in 0..cfg.n_layer {
            let t = |what: T, dims: &[u64]| g.tensor_f32(&what.gguf_weight(l), dims);
            let wq = t(T::Q, &[c, c])?;
            let wk = t(T::K, &[c, kv])?;
            let (wq, wk) = if interleaved {
                (
                    permute_rope_rows(&wq, cfg.n_head, dh, c as usize, true),
                    permute_rope_rows(&wk, cfg.n_kv_head, dh, c as usize, true),
                )
            } else {
                (wq, wk)
            };
            let qkv_bias = if cfg.family.qkv_bias() {
                let b = |what: T, n: u64| g.tensor_f32(&what.gguf_bias(l), &[n]);
                Some(QkvBias {
                    q: b(T::Q, c)?,
                    k: b(T::K, kv)?,
                    v: b(T::V, kv)?,
                })
            } else {
                None
            };
            layers.push(LayerWeights {
                attn_norm: t(T::AttnNorm, &[c])?,
                wq,
                wk,
                qkv_bias,
                wv: t(T::V, &[c, kv])?,
                wo: t(T::O, &[c, c])?,
                ffn_norm: t(T::FfnNorm, &[c])?,
                w_gate: t(T::Gate, &[c, f])?,
                w_up: t(T::Up, &[c, f])?,
                w_down: t(T::Down, &[f, c])?,
            });
        }
        let final_norm = g.tensor_f32(keys::OUTPUT_NORM, &[c])?;
        let lm_head = match g.tensor(keys::OUTPUT) {
            Some(_) => Some(g.tensor_f32(keys::OUTPUT, &[c, v])?),
            None => None,
        };
        Ok(LlamaWeights {
            cfg,
            embed,
            layers,
            final_norm,
            lm_head,
        })
    }

    /// Every tensor with its Hugging Face name and shape (outer first), in a fixed order.
    pub fn hf_tensors(&self) -> Vec<(String, Vec<usize>, &[f32])> {
        let c = &self.cfg;
        let (d, f, kv) = (c.d_model, c.d_ff, c.n_kv_head * c.head_dim());
        let mut out: Vec<(String, Vec<usize>, &[f32])> = vec![(
            "model.embed_tokens.weight".into(),
            vec![c.vocab_size, d],
            &self.embed,
        )];
        for (i, l) in self.layers.iter().enumerate() {
            let p = |t: T| t.hf_weight(i);
            out.push((p(T::AttnNorm), vec![d], &l.attn_norm));
            out.push((p(T::Q), vec![d, d], &l.wq));
            out.push((p(T::K), vec![kv, d], &l.wk));
            out.push((p(T::V), vec![kv, d], &l.wv));
            if let Some(b) = &l.qkv_bias {
                out.push((T::Q.hf_bias(i), vec![d], &b.q));
                out.push((T::K.hf_bias(i), vec![kv], &b.k));
                out.push((T::V.hf_bias(i), vec![kv], &b.v));
            }
            out.push((p(T::O), vec![d, d], &l.wo));
            out.push((p(T::FfnNorm), vec![d], &l.ffn_norm));
            out.push((p(T::Gate), vec![f, d], &l.w_gate));
            out.push((p(T::Up), vec![f, d], &l.w_up));
            out.push((p(T::Down), vec![d, f], &l.w_down));
        }
        out.push(("model.norm.weight".into(), vec![d], &self.final_norm));
        if let Some(h) = &self.lm_head {
            out.push(("lm_head.weight".into(), vec![c.vocab_size, d], h));
        }
        out
    }

    /// Loads `model.safetensors` bytes (F32, F16 or BF16 tensors, HF names) for `cfg`.
    pub fn from_safetensors(
        cfg: LlamaConfig,
        tied: bool,
        bytes: &[u8],
        path: &str,
    ) -> crate::Result<Self> {
        Self::from_safetensors_files(cfg, tied, &[(path.to_string(), bytes)], path)
    }

    /// Loads the tensors of several safetensors files (the shards of a folder, each tensor in
    /// exactly one: `io::safetensors_shards` checks that); `path` names the set in messages.
    pub fn from_safetensors_files(
        cfg: LlamaConfig,
        tied: bool,
        files: &[(String, &[u8])],
        path: &str,
    ) -> crate::Result<Self> {
        let sts = files
            .iter()
            .map(|(p, b)| {
                safetensors::SafeTensors::deserialize(b).map_err(|e| {
                    crate::io::FormatError::Malformed {
                        path: p.clone(),
                        what: format!("not a valid safetensors file: {e}"),
                    }
                    .into()
                })
            })
            .collect::<crate::Result<Vec<_>>>()?;
        // Every tensor must be one read below: a kind the engine lacks, or a layer beyond
        // num_hidden_layers, would otherwise be dropped without a word.
        // Sorted: safetensors lists names in hash order, and the message names the first.
        for (st, (p, _)) in sts.iter().zip(files) {
            let mut names = st.names();
            names.sort_unstable();
            check_all_read(
                names,
                &cfg,
                Scheme::Hf,
                p,
                "config.json's num_hidden_layers",
            )?;
        }
        let find = |name: &str| sts.iter().find_map(|st| st.tensor(name).ok());
        let has = |name: &str| find(name).is_some();
        let get = |name: &str, shape: &[usize]| -> crate::Result<Vec<f32>> {
            let t = find(name)
                .ok_or_else(|| ModelError::Config(format!("{path}: tensor {name} is missing")))?;
            if t.shape() != shape {
                return Err(ModelError::Config(format!(
                    "{path}: tensor {name} has shape {:?}, config.json implies {shape:?}",
                    t.shape()
                ))
                .into());
            }
            let d = t.data();
            Ok(match t.dtype() {
                safetensors::Dtype::F32 => d
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
                safetensors::Dtype::F16 => d
                    .chunks_exact(2)
                    .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                    .collect(),
                safetensors::Dtype::BF16 => d
                    .chunks_exact(2)
                    .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                    .collect(),
                other => {
                    return Err(ModelError::Config(format!(
                        "{path}: tensor {name} has dtype {other:?} (F32, F16, BF16 are supported)"
                    ))
                    .into());
                }
            })
        };
        let (d, f, kv, v) = (
            cfg.d_model,
            cfg.d_ff,
            cfg.n_kv_head * cfg.head_dim(),
            cfg.vocab_size,
        );
        let embed = get("model.embed_tokens.weight", &[v, d])?;
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for i in 0..cfg.n_layer {
            let p = |t: T| t.hf_weight(i);
            let qkv_bias = if cfg.family.qkv_bias() {
                let b = |t: T, n: usize| get(&t.hf_bias(i), &[n]);
                Some(QkvBias {
                    q: b(T::Q, d)?,
                    k: b(T::K, kv)?,
                    v: b(T::V, kv)?,
                })
            } else {
                None
            };
            layers.push(LayerWeights {
                qkv_bias,
                attn_norm: get(&p(T::AttnNorm), &[d])?,
                wq: get(&p(T::Q), &[d, d])?,
                wk: get(&p(T::K), &[kv, d])?,
                wv: get(&p(T::V), &[kv, d])?,
                wo: get(&p(T::O), &[d, d])?,
                ffn_norm: get(&p(T::FfnNorm), &[d])?,
                w_gate: get(&p(T::Gate), &[f, d])?,
                w_up: get(&p(T::Up), &[f, d])?,
                w_down: get(&p(T::Down), &[d, f])?,
            });
        }
        let final_norm = get("model.norm.weight", &[d])?;
        let lm_head = if tied && !has("lm_head.weight") {
            None
        } else {
            Some(get("lm_head.weight", &[v, d])?)
        };
        Ok(LlamaWeights {
            cfg,
            embed,
            layers,
            final_norm,
            lm_head,
        })
    }

    /// Serialises to safetensors bytes (F32, HF names and layout).
    pub fn to_safetensors(&self) -> crate::Result<Vec<u8>> {
        let tensors = self.hf_tensors();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
            .iter()
            .map(|(n, s, d)| {
                let v = safetensors::tensor::TensorView::new(
                    safetensors::Dtype::F32,
                    s.clone(),
                    bytemuck::cast_slice(d),
                )
                .map_err(|e| ModelError::Config(format!("tensor {n}: {e}")))?;
                Ok((n.clone(), v))
            })
            .collect::<crate::Result<_>>()?;
        safetensors::tensor::serialize(views, None)
            .map_err(|e| ModelError::Config(format!("serialising safetensors: {e}")).into())
    }
}
