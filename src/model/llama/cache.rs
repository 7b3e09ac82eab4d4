//! A generation's state: the keys and values of the positions seen so far, the RoPE angles of
//! every position the cache can hold, and the buffers a forward pass works in, so a decode
//! step allocates nothing (prefill grows the buffers once for its window and reuses them).
//!
//! Keys and values are stored in f32 or, as llama.cpp does by default, in f16 ([`KvDtype`]):
//! half the bytes a decode step streams, at the cost of rounding each cached key and value
//! to 11 significant bits; or as 8- or 4-bit group codes, as QuaRot does (the storage and the
//! attention over it are in [`super::kv_store`] and [`super::kv_quant`]).

use super::config::LlamaConfig;
use super::kv_store::KvStore;
use crate::model::ModelError;
use crate::nn::rope;

pub use super::kv_store::KvDtype;

/// Keys and values per layer (`cap x K·D` each, RoPE applied to keys), and scratch.
#[derive(Debug, Clone)]
pub struct KvCache {
    pub(super) store: KvStore,
    pub(super) len: usize,
    pub(super) cap: usize,
    /// `cos`, `sin` of every position's angles (`cap x D/2`).
    pub(super) cos: Vec<f32>,
    pub(super) sin: Vec<f32>,
    pub(super) s: Scratch,
}

impl KvCache {
    /// An empty cache for up to `cap` positions of a model shaped `cfg`, with scratch for
    /// one-token steps. `cap` must be between 1 and the model's context.
    pub fn new(cfg: &LlamaConfig, cap: usize) -> crate::Result<Self> {
        Self::with_dtype(cfg, cap, KvDtype::F32)
    }

    /// [`new`](Self::new), keys and values stored as `dtype`.
    pub fn with_dtype(cfg: &LlamaConfig, cap: usize, dtype: KvDtype) -> crate::Result<Self> {
        if cap == 0 || cap > cfg.max_context {
            return Err(ModelError::Config(format!(
                "a cache of {cap} positions: the model's context is 1 to {}",
                cfg.max_context
            ))
            .into());
        }
        check_dtype(dtype, cfg.head_dim())?;
        let kvd = cfg.n_kv_head * cfg.head_dim();
        // Checked before the allocation, not after an abort.
        crate::io::memory::check_fits(
            Self::bytes_needed(cfg, cap, dtype),
            format_args!("a KV cache of {cap} positions"),
        )?;
        let half = cfg.head_dim() / 2;
        let (mut cos, mut sin) = (vec![0.0; cap * half], vec![0.0; cap * half]);
        rope::tables(&mut cos, &mut sin, 0..cap, cfg.head_dim(), cfg.rope_theta);
        let mut s = Scratch::default();
        s.ensure(cfg, 1, cfg.n_head * cap, 1);
        Ok(KvCache {
            store: KvStore::new(dtype, cfg.n_layer, cap * kvd, kvd, cfg.head_dim()),
            len: 0,
            cap,
            cos,
            sin,
            s,
        })
    }

    /// The bytes of keys and values of a cache of `cap` positions stored as `dtype` (a
    /// quantised cache's f32 staging rows included); `None` on overflow.
    pub fn bytes_needed(cfg: &LlamaConfig, cap: usize, dtype: KvDtype) -> Option<usize> {
        let kvd = cfg.n_kv_head * cfg.head_dim();
        let row = dtype.row_bytes(kvd, cfg.head_dim());
        let staging = if dtype == KvDtype::F32 { 0 } else { 8 * kvd };
        crate::io::memory::bytes(&[cap, cfg.n_layer, 2, row])
            .and_then(|b| b.checked_add(cap.checked_mul(staging)?))
    }

    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum positions this cache holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Forgets every position (keeps the memory).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// How keys and values are stored.
    pub fn dtype(&self) -> KvDtype {
        self.store.dtype()
    }

    /// Bytes held: keys, values, RoPE tables and scratch.
    pub fn bytes(&self) -> usize {
        self.store.bytes() + 4 * (self.cos.len() + self.sin.len() + self.s.len())
    }
}

/// Why keys and values of heads of `head_dim` cannot be stored as `dtype`, if they cannot.
fn check_dtype(dtype: KvDtype, head_dim: usize) -> crate::Result<()> {
    let KvDtype::Quant { bits, group } = dtype else {
        return Ok(());
    };
    let max = crate::nn::attention_decode_q::MAX_HEAD_DIM;
    let msg = if bits != 4 && bits != 8 {
        format!("a quantised KV cache of {bits} bits: use 8 or 4")
    } else if head_dim > max || !head_dim.is_multiple_of(2) {
        format!("a quantised KV cache needs an even head width of at most {max}, not {head_dim}")
    } else if group != 0 && !head_dim.is_multiple_of(group) {
        format!(
            "`kv_cache` groups of {group} values do not divide the head width {head_dim}: use a \
             divisor of {head_dim} (or no group: one per head)"
        )
    } else {
        return Ok(());
    };
    Err(ModelError::Config(msg).into())
}

/// The buffers of a forward pass over `rows` tokens (row-major, one row per token).
#[derive(Debug, Clone, Default)]
pub(super) struct Scratch {
    /// Residual stream (`rows x C`).
    pub x: Vec<f32>,
    /// Normed residual (`rows x C`).
    pub h: Vec<f32>,
    /// Queries (`rows x H·D`).
    pub q: Vec<f32>,
    /// Attention output (`rows x H·D`).
    pub att: Vec<f32>,
    /// A linear layer's output added to the residual (`rows x C`).
    pub y: Vec<f32>,
    /// SwiGLU gate, then its output (`rows x F`).
    pub g: Vec<f32>,
    /// SwiGLU up projection (`rows x F`).
    pub u: Vec<f32>,
    /// A quantised copy of a linear layer's input, when activations are quantised.
    pub xq: Vec<f32>,
    /// Scratch of the online Hadamard transforms.
    pub had: Vec<f32>,
    /// A linear layer's input rounded to 8 bits, when decode multiplies in integers.
    pub q8: crate::nn::qmatvec::Q8Vector,
    /// Keys and values of a pass over several sequences, before each goes to its store
    /// (`rows x K·D`; empty until such a pass).
    pub k: Vec<f32>,
    /// Values, as `k`.
    pub v: Vec<f32>,
    /// Attention scores (`H x rows x keys`).
    pub scores: Vec<f32>,
    /// Logits of the scored rows (`rows x V`).
    pub logits: Vec<f32>,
}

/// Grows `v` to at least `n` elements (never shrinks, so steady state allocates nothing).
pub(super) fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

impl Scratch {
    /// Makes room for `rows` tokens, `scores` attention scores (the largest segment's `H x
    /// rows x keys`) and `logit_rows` scored rows.
    pub fn ensure(&mut self, c: &LlamaConfig, rows: usize, scores: usize, logit_rows: usize) {
        let (d, f) = (c.d_model, c.d_ff);
        let qd = c.n_head * c.head_dim();
        grow(&mut self.x, rows * d);
        grow(&mut self.h, rows * d);
        grow(&mut self.q, rows * qd);
        grow(&mut self.att, rows * qd);
        grow(&mut self.y, rows * d);
        grow(&mut self.g, rows * f);
        grow(&mut self.u, rows * f);
        grow(&mut self.scores, scores);
        grow(&mut self.logits, logit_rows * c.vocab_size);
    }

    /// Floats held.
    fn len(&self) -> usize {
        [
            &self.x,
            &self.h,
            &self.q,
            &self.att,
            &self.y,
            &self.g,
            &self.u,
            &self.xq,
            &self.had,
            &self.k,
            &self.v,
            &self.scores,
            &self.logits,
        ]
        .iter()
        .map(|v| v.len())
        .sum()
    }
}
