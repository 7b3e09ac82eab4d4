//! The weights a [`Llama`](super::Llama) runs on, each linear layer in its storage type: owned
//! f32 (a Hugging Face folder, or a model being rotated or quantised in memory), or the bytes
//! of a memory-mapped GGUF file (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, the K-quants, IQ4_NL and IQ4_XS), never expanded to f32.
//!
//! A Llama GGUF keeps its Q/K rows in llama.cpp's order for interleaved RoPE and runs with
//! [`RopeLayout::Interleaved`] (a Qwen2 GGUF keeps Hugging Face's order); owned weights are in Hugging Face order (half-split). The two
//! compute the same attention (`nn::rope`).

use super::config::{Family, LlamaConfig};
use super::layer_tensor::LayerTensor as T;
use super::weights::{LlamaWeights, QkvBias};
use crate::io::gguf::{GgmlType, GgufFile, TensorBytes, keys};
use crate::nn::qmatvec::QMatrix;
use crate::nn::rope::RopeLayout;

/// One weight matrix, `rows x cols` (`out x in`, `y = W·x`).
#[derive(Debug, Clone)]
pub struct Linear {
    rows: usize,
    cols: usize,
    store: Store,
}

#[derive(Debug, Clone)]
enum Store {
    Owned(Vec<f32>),
    Mapped(GgmlType, TensorBytes),
}

impl Linear {
    /// An owned f32 matrix; `None` unless `w.len() == rows·cols`.
    pub fn owned(w: Vec<f32>, rows: usize, cols: usize) -> Option<Self> {
        QMatrix::from_f32(&w, rows, cols)?;
        Some(Linear {
            rows,
            cols,
            store: Store::Owned(w),
        })
    }

    /// GGUF tensor `name` (dims innermost first: `[cols, rows]`) left in the file's mapping.
    /// An F32 tensor the mapping cannot serve as `f32` (misaligned, or a big-endian host) is
    /// copied.
    pub fn from_gguf(g: &GgufFile, name: &str, rows: usize, cols: usize) -> crate::Result<Self> {
        let (ty, bytes) = g.tensor_bytes(name, &[cols as u64, rows as u64])?;
        let direct =
            cfg!(target_endian = "little") && QMatrix::new(ty, rows, cols, bytes.bytes()).is_some();
        if direct {
            return Ok(Linear {
                rows,
                cols,
                store: Store::Mapped(ty, bytes),
            });
        }
        let w = g.tensor_f32(name, &[cols as u64, rows as u64])?;
        Ok(Linear {
            rows,
            cols,
            store: Store::Owned(w),
        })
    }

    /// The matrix for the kernels.
    pub fn view(&self) -> QMatrix<'_> {
        let q = match &self.store {
            Store::Owned(w) => QMatrix::from_f32(w, self.rows, self.cols),
            Store::Mapped(ty, b) => QMatrix::new(*ty, self.rows, self.cols, b.bytes()),
        };
        // Both constructors above succeeded on the same data when `self` was built.
        q.expect("weight shape validated at load")
    }

    /// Storage type.
    pub fn ty(&self) -> GgmlType {
        match &self.store {
            Store::Owned(_) => GgmlType::F32,
            Store::Mapped(ty, _) => *ty,
        }
    }

    /// Bytes the matrix occupies (what a matrix-vector product reads).
    pub fn bytes(&self) -> usize {
        self.view().bytes().len()
    }

    /// Whether the weights are in a memory-mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(&self.store, Store::Mapped(_, b) if b.is_mapped())
    }
}

/// One decoder layer: norms (`C`, f32) and the seven linear layers.
#[derive(Debug, Clone)]
pub struct Layer {
    /// RMSNorm weight before attention.
    pub attn_norm: Vec<f32>,
    /// `H·D x C`.
    pub q: Linear,
    /// `K·D x C`.
    pub k: Linear,
    /// `K·D x C`.
    pub v: Linear,
    /// `C x H·D`.
    pub o: Linear,
    /// RMSNorm weight before the FFN.
    pub ffn_norm: Vec<f32>,
    /// `F x C`.
    pub gate: Linear,
    /// `F x C`.
    pub up: Linear,
    /// `C x F`.
    pub down: Linear,
    /// q/k/v biases (Qwen2), in the same row order as `q`, `k`, `v`.
    pub qkv_bias: Option<QkvBias>,
}

impl Layer {
    /// Wraps one layer's owned f32 weights (Hugging Face order) of a model of `c`.
    pub fn from_owned(l: super::LayerWeights, c: &LlamaConfig) -> Self {
        let (d, f, qd, kvd) = dims(c);
        let lin = |x: Vec<f32>, r: usize, k: usize| {
            // `LlamaWeights` are built with these shapes (loaders check every tensor).
            Linear::owned(x, r, k).expect("LlamaWeights shapes follow its config")
        };
        Layer {
            attn_norm: l.attn_norm,
            q: lin(l.wq, qd, d),
            k: lin(l.wk, kvd, d),
            v: lin(l.wv, kvd, d),
            o: lin(l.wo, d, qd),
            ffn_norm: l.ffn_norm,
            gate: lin(l.w_gate, f, d),
            up: lin(l.w_up, f, d),
            down: lin(l.w_down, d, f),
            qkv_bias: l.qkv_bias,
        }
    }
}

/// Every weight of a model, with the RoPE layout its Q/K rows are stored for.
#[derive(Debug, Clone)]
pub struct ModelWeights {
    /// Token embedding (`V x C`).
    pub embed: Linear,
    /// Decoder layers.
    pub layers: Vec<Layer>,
    /// Final RMSNorm weight (`C`).
    pub final_norm: Vec<f32>,
    /// Output projection (`V x C`); `None` when tied to `embed`.
    pub head: Option<Linear>,
    /// The pairing of head dimensions the Q/K rows are stored for.
    pub rope: RopeLayout,
}

impl ModelWeights {
    /// The output projection, whether tied or not.
    pub fn head(&self) -> &Linear {
        self.head.as_ref().unwrap_or(&self.embed)
    }

    /// Bytes of weights one decode step reads: every linear layer, the output projection, one
    /// embedding row and the norms.
    pub fn bytes_per_token(&self) -> u64 {
        let c = self.final_norm.len();
        let norms = (2 * self.layers.len() + 1) * c * 4;
        let layers: usize = self
            .layers
            .iter()
            .map(|l| [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down].map(Linear::bytes))
            .map(|b| b.iter().sum::<usize>())
            .sum();
        let row = self.embed.view().row_bytes();
        (layers + self.head().bytes() + row + norms) as u64
    }

    /// Owned f32 weights in Hugging Face order (half-split RoPE).
    pub fn from_owned(w: LlamaWeights) -> Self {
        let c = w.cfg.clone();
        let d = c.d_model;
        let lin = |x: Vec<f32>, r: usize, k: usize| {
            // `LlamaWeights` are built with these shapes (loaders check every tensor).
            Linear::owned(x, r, k).expect("LlamaWeights shapes follow its config")
        };
        let layers = w
            .layers
            .into_iter()
            .map(|l| Layer::from_owned(l, &c))
            .collect();
        ModelWeights {
            embed: lin(w.embed, c.vocab_size, d),
            layers,
            final_norm: w.final_norm,
            head: w.lm_head.map(|h| lin(h, c.vocab_size, d)),
            rope: RopeLayout::HalfSplit,
        }
    }

    /// The weights of a GGUF file, left in its mapping (interleaved RoPE).
    pub fn from_gguf(g: &GgufFile, c: &LlamaConfig) -> crate::Result<Self> {
        let (d, f, qd, kvd) = dims(c);
        let v = c.vocab_size;
        let norm = |name: &str| g.tensor_f32(name, &[d as u64]);
        let mut layers = Vec::with_capacity(c.n_layer);
        for l in 0..c.n_layer {
            let lin = |t: T, r: usize, k: usize| Linear::from_gguf(g, &t.gguf_weight(l), r, k);
            let qkv_bias = if c.family.qkv_bias() {
                let bias = |t: T, n: usize| g.tensor_f32(&t.gguf_bias(l), &[n as u64]);
                Some(QkvBias {
                    q: bias(T::Q, qd)?,
                    k: bias(T::K, kvd)?,
                    v: bias(T::V, kvd)?,
                })
            } else {
                None
            };
            layers.push(Layer {
                qkv_bias,
                attn_norm: norm(&T::AttnNorm.gguf_weight(l))?,
                q: lin(T::Q, qd, d)?,
                k: lin(T::K, kvd, d)?,
                v: lin(T::V, kvd, d)?,
                o: lin(T::O, d, qd)?,
                ffn_norm: norm(&T::FfnNorm.gguf_weight(l))?,
                gate: lin(T::Gate, f, d)?,
                up: lin(T::Up, f, d)?,
                down: lin(T::Down, d, f)?,
            });
        }
        let head = match g.tensor(keys::OUTPUT) {
            Some(_) => Some(Linear::from_gguf(g, keys::OUTPUT, v, d)?),
            None => None,
        };
        Ok(ModelWeights {
            embed: Linear::from_gguf(g, keys::TOKEN_EMBD, v, d)?,
            layers,
            final_norm: norm(keys::OUTPUT_NORM)?,
            head,
            // llama.cpp permutes Llama's Q/K rows for adjacent-pair RoPE; Qwen2 files keep
            // Hugging Face's order (NEOX RoPE).
            rope: match c.family {
                Family::Llama => RopeLayout::Interleaved,
                Family::Qwen2 => RopeLayout::HalfSplit,
            },
        })
    }
}

/// `(C, F, H·D, K·D)`.
fn dims(c: &LlamaConfig) -> (usize, usize, usize, usize) {
    let dh = c.head_dim();
    (c.d_model, c.d_ff, c.n_head * dh, c.n_kv_head * dh)
}
