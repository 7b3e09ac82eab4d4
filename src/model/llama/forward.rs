//! Inference: the Llama forward pass over a chunk of tokens with a KV cache.
//!
//! Per layer, with `x` the residual stream (`T x C`):
//! `h = rmsnorm(x)·γ₁; q,k,v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ; q,k ← RoPE (rotate-half, HF layout);
//! x += attn(q, k, v)·Woᵀ; h = rmsnorm(x)·γ₂; x += (silu(h·Wgᵀ) ⊙ h·Wuᵀ)·Wdᵀ`,
//! then `logits = rmsnorm(x)·γ_f · Wheadᵀ`. Attention is causal and grouped: query head `h`
//! reads key/value head `h / (H/K)`.

use rayon::prelude::*;

use super::quant::{ActStats, LinearSite, quantize_rows};
use super::weights::LlamaWeights;
use crate::model::ModelError;
use crate::nn::matmul::{Trans, matmul};

/// Keys and values of the positions seen so far, per layer (`cap x K·D` each).
#[derive(Debug, Clone)]
pub struct KvCache {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    len: usize,
    cap: usize,
}

impl KvCache {
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
}

/// A model ready to run: weights, RoPE tables, and optional simulated activation quantisation
/// and activation statistics at the inputs of the linear layers.
#[derive(Debug, Clone)]
pub struct Llama {
    /// The weights.
    pub w: LlamaWeights,
    /// Quantise each decoder linear layer's input per token to this many bits (symmetric RTN;
    /// `lm_head`'s input is left alone).
    pub act_bits: Option<u32>,
    /// When set, statistics of every linear layer's input are accumulated here.
    pub stats: Option<ActStats>,
    /// An orthogonal map applied online to each row of `down_proj`'s input (`F` wide) before
    /// it is quantised, as QuaRot does with a Hadamard transform; `w_down` must already hold
    /// `W_down·H` so the product is unchanged.
    pub down_transform: Option<RowTransform>,
}

/// A thread-safe in-place map on a buffer of rows.
pub type RowFn = dyn Fn(&mut [f32]) + Send + Sync;

/// `x ← x·H` on each `F`-wide row of a buffer (shared, thread-safe).
#[derive(Clone)]
pub struct RowTransform(pub std::sync::Arc<RowFn>);

impl std::fmt::Debug for RowTransform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowTransform")
    }
}

/// `out = x / sqrt(mean(x²) + ε) ⊙ γ`, row by row (`rows x C`).
pub fn rms_norm(out: &mut [f32], x: &[f32], gamma: &[f32], eps: f64) {
    let c = gamma.len();
    for (o, r) in out.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
        let ms = r.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / c as f64;
        let inv = (1.0 / (ms + eps).sqrt()) as f32;
        for ((o, &v), &g) in o.iter_mut().zip(r).zip(gamma) {
            *o = v * inv * g;
        }
    }
}

impl Llama {
    /// Wraps weights for inference.
    pub fn new(w: LlamaWeights) -> Self {
        Llama {
            w,
            act_bits: None,
            down_transform: None,
            stats: None,
        }
    }

    /// An empty KV cache for up to `cap` positions.
    pub fn new_cache(&self, cap: usize) -> KvCache {
        let kvd = self.w.cfg.n_kv_head * self.w.cfg.head_dim();
        let n = self.w.cfg.n_layer;
        KvCache {
            k: vec![vec![0.0; cap * kvd]; n],
            v: vec![vec![0.0; cap * kvd]; n],
            len: 0,
            cap,
        }
    }

    /// `y (rows x out) = x (rows x in) · Wᵀ`, recording statistics of `x` and quantising it when
    /// asked.
    fn linear(&mut self, site: LinearSite, x: &[f32], w: LinearRef, rows: usize) -> Vec<f32> {
        let (wd, out_dim, in_dim) = weight(&self.w, w);
        if let Some(s) = self.stats.as_mut() {
            s.record(site, x, in_dim);
        }
        let mut y = vec![0.0; rows * out_dim];
        // lm_head's input stays in full precision, as in QuaRot.
        match self.act_bits {
            Some(b) if b < 16 && site != LinearSite::HeadIn => {
                let mut xq = x.to_vec();
                quantize_rows(&mut xq, in_dim, b);
                matmul(
                    &mut y,
                    &xq,
                    Trans::No,
                    wd,
                    Trans::Yes,
                    rows,
                    in_dim,
                    out_dim,
                    false,
                    2,
                );
            }
            _ => matmul(
                &mut y,
                x,
                Trans::No,
                wd,
                Trans::Yes,
                rows,
                in_dim,
                out_dim,
                false,
                2,
            ),
        }
        y
    }
}

/// The weight of linear `w` with its (out, in) sizes.
fn weight(m: &LlamaWeights, w: LinearRef) -> (&[f32], usize, usize) {
    let c = &m.cfg;
    let (d, f, qd, kvd) = (
        c.d_model,
        c.d_ff,
        c.n_head * c.head_dim(),
        c.n_kv_head * c.head_dim(),
    );
    match w {
        LinearRef::Q(l) => (&m.layers[l].wq, qd, d),
        LinearRef::K(l) => (&m.layers[l].wk, kvd, d),
        LinearRef::V(l) => (&m.layers[l].wv, kvd, d),
        LinearRef::O(l) => (&m.layers[l].wo, d, qd),
        LinearRef::Gate(l) => (&m.layers[l].w_gate, f, d),
        LinearRef::Up(l) => (&m.layers[l].w_up, f, d),
        LinearRef::Down(l) => (&m.layers[l].w_down, d, f),
        LinearRef::Head => (m.lm_head(), c.vocab_size, d),
    }
}

impl Llama {
    /// Runs `tokens` (positions `cache.len()..`) through the model, appends their keys and
    /// values to `cache`, and returns the logits (`(T − from) x V`) of positions `from..T`
    /// of the chunk. With `hidden_at = Some(l)` it instead returns the residual stream after
    /// `l` layers (`T x C`, `l = 0` is the embedding) and stops there.
    pub fn forward_ext(
        &mut self,
        tokens: &[u32],
        cache: &mut KvCache,
        from: usize,
        hidden_at: Option<usize>,
    ) -> crate::Result<Vec<f32>> {
        let cfg = self.w.cfg.clone();
        let (c, t) = (cfg.d_model, tokens.len());
        let (nh, nkv, dh) = (cfg.n_head, cfg.n_kv_head, cfg.head_dim());
        let p0 = cache.len;
        if p0 + t > cache.cap {
            return Err(ModelError::Config(format!(
                "context overflow: {} cached + {t} new positions exceed the cache of {}",
                p0, cache.cap
            ))
            .into());
        }
        if let Some(&bad) = tokens.iter().find(|&&x| x as usize >= cfg.vocab_size) {
            return Err(ModelError::Config(format!(
                "token id {bad} is outside the vocabulary of {}",
                cfg.vocab_size
            ))
            .into());
        }
        let mut x = vec![0.0f32; t * c];
        for (row, &tok) in x.chunks_exact_mut(c).zip(tokens) {
            row.copy_from_slice(&self.w.embed[tok as usize * c..(tok as usize + 1) * c]);
        }
        let (cos, sin) = rope_tables(dh, cfg.rope_theta, p0, t);
        let mut h = vec![0.0f32; t * c];
        for l in 0..cfg.n_layer {
            if hidden_at == Some(l) {
                return Ok(x);
            }
            rms_norm(&mut h, &x, &self.w.layers[l].attn_norm, cfg.rms_eps);
            let mut q = self.linear(LinearSite::AttnIn, &h, LinearRef::Q(l), t);
            let mut k = self.linear(LinearSite::AttnIn, &h, LinearRef::K(l), t);
            let v = self.linear(LinearSite::AttnIn, &h, LinearRef::V(l), t);
            apply_rope(&mut q, nh, dh, &cos, &sin);
            apply_rope(&mut k, nkv, dh, &cos, &sin);
            let kvd = nkv * dh;
            cache.k[l][p0 * kvd..(p0 + t) * kvd].copy_from_slice(&k);
            cache.v[l][p0 * kvd..(p0 + t) * kvd].copy_from_slice(&v);
            let att = attention(
                &q,
                &cache.k[l][..(p0 + t) * kvd],
                &cache.v[l][..(p0 + t) * kvd],
                p0,
                nh,
                nkv,
                dh,
            );
            let o = self.linear(LinearSite::OIn, &att, LinearRef::O(l), t);
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            rms_norm(&mut h, &x, &self.w.layers[l].ffn_norm, cfg.rms_eps);
            let mut g = self.linear(LinearSite::MlpIn, &h, LinearRef::Gate(l), t);
            let u = self.linear(LinearSite::MlpIn, &h, LinearRef::Up(l), t);
            // SwiGLU: silu(g) ⊙ u.
            g.iter_mut()
                .zip(&u)
                .for_each(|(a, &b)| *a = *a / (1.0 + (-*a).exp()) * b);
            if let Some(tr) = &self.down_transform {
                (tr.0)(&mut g);
            }
            let dn = self.linear(LinearSite::DownIn, &g, LinearRef::Down(l), t);
            x.iter_mut().zip(&dn).for_each(|(a, b)| *a += b);
        }
        cache.len = p0 + t;
        if hidden_at.is_some() {
            return Ok(x);
        }
        let from = from.min(t);
        let mut hf = vec![0.0f32; (t - from) * c];
        rms_norm(&mut hf, &x[from * c..], &self.w.final_norm, cfg.rms_eps);
        Ok(self.linear(LinearSite::HeadIn, &hf, LinearRef::Head, t - from))
    }

    /// Logits (`(T − from) x V`) of positions `from..T` of `tokens`, continuing `cache`.
    pub fn forward(
        &mut self,
        tokens: &[u32],
        cache: &mut KvCache,
        from: usize,
    ) -> crate::Result<Vec<f32>> {
        self.forward_ext(tokens, cache, from, None)
    }
}

/// Which linear layer (layer index inside).
#[derive(Debug, Clone, Copy)]
enum LinearRef {
    Q(usize),
    K(usize),
    V(usize),
    O(usize),
    Gate(usize),
    Up(usize),
    Down(usize),
    Head,
}

/// cos/sin of `pos·θ^(−2i/D)` for positions `p0..p0+t`, `i < D/2` (each `t x D/2`).
fn rope_tables(dh: usize, theta: f64, p0: usize, t: usize) -> (Vec<f32>, Vec<f32>) {
    let half = dh / 2;
    let mut cos = Vec::with_capacity(t * half);
    let mut sin = Vec::with_capacity(t * half);
    for p in p0..p0 + t {
        for i in 0..half {
            let a = p as f64 * theta.powf(-2.0 * i as f64 / dh as f64);
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }
    (cos, sin)
}

/// Rotate-half RoPE in place on `x` (`T x heads·D`): pairs `(i, i + D/2)` of each head.
fn apply_rope(x: &mut [f32], heads: usize, dh: usize, cos: &[f32], sin: &[f32]) {
    let half = dh / 2;
    for (row, (c, s)) in x
        .chunks_exact_mut(heads * dh)
        .zip(cos.chunks_exact(half).zip(sin.chunks_exact(half)))
    {
        for hd in row.chunks_exact_mut(dh) {
            for i in 0..half {
                let (a, b) = (hd[i], hd[i + half]);
                hd[i] = a * c[i] - b * s[i];
                hd[i + half] = b * c[i] + a * s[i];
            }
        }
    }
}

/// Causal grouped-query attention of `T` new queries (`T x H·D`, absolute positions
/// `p0..p0+T`) over `N = p0 + T` cached keys/values (`N x K·D`). Returns `T x H·D`.
///
/// Per head, on contiguous copies: `S = Q_h·K_gᵀ/√D` (`T x N`, GEMM), causal mask and softmax
/// per row, `O_h = P·V_g` (GEMM). Heads run in parallel, each GEMM single-threaded.
fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    p0: usize,
    nh: usize,
    nkv: usize,
    dh: usize,
) -> Vec<f32> {
    let (qd, kvd) = (nh * dh, nkv * dh);
    let t = q.len() / qd;
    let n = k.len() / kvd;
    let group = nh / nkv;
    let scale = 1.0 / (dh as f32).sqrt();
    let gather = |src: &[f32], width: usize, rows: usize, col: usize| -> Vec<f32> {
        let mut out = Vec::with_capacity(rows * dh);
        for r in 0..rows {
            out.extend_from_slice(&src[r * width + col..r * width + col + dh]);
        }
        out
    };
    let heads: Vec<Vec<f32>> = (0..nh)
        .into_par_iter()
        .map(|h| {
            let g = h / group;
            let qh = gather(q, qd, t, h * dh);
            let kg = gather(k, kvd, n, g * dh);
            let vg = gather(v, kvd, n, g * dh);
            let mut s = vec![0.0f32; t * n];
            matmul(&mut s, &qh, Trans::No, &kg, Trans::Yes, t, dh, n, false, 1);
            for (i, row) in s.chunks_exact_mut(n).enumerate() {
                // Query i (absolute position p0 + i) sees keys 0..=p0 + i.
                let visible = p0 + i + 1;
                let mut mx = f32::NEG_INFINITY;
                for x in &mut row[..visible] {
                    *x *= scale;
                    mx = mx.max(*x);
                }
                let mut sum = 0.0f32;
                for x in &mut row[..visible] {
                    *x = (*x - mx).exp();
                    sum += *x;
                }
                let inv = 1.0 / sum;
                row[..visible].iter_mut().for_each(|x| *x *= inv);
                row[visible..].iter_mut().for_each(|x| *x = 0.0);
            }
            let mut oh = vec![0.0f32; t * dh];
            matmul(&mut oh, &s, Trans::No, &vg, Trans::No, t, n, dh, false, 1);
            oh
        })
        .collect();
    let mut out = vec![0.0f32; t * qd];
    for (h, oh) in heads.iter().enumerate() {
        for (r, src) in oh.chunks_exact(dh).enumerate() {
            out[r * qd + h * dh..r * qd + (h + 1) * dh].copy_from_slice(src);
        }
    }
    out
}
