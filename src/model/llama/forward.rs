//! Inference: the Llama forward pass over a chunk of tokens with a KV cache, on the shared
//! `nn` kernels, reading each weight in its stored type ([`ModelWeights`]).
//!
//! Per layer, with `x` the residual stream (`T x C`):
//! `h = rmsnorm(x)·γ₁; q,k,v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ (+ biases in Qwen2); q,k ← RoPE; x += attn(q, k, v)·Woᵀ;
//! h = rmsnorm(x)·γ₂; x += (silu(h·Wgᵀ) ⊙ h·Wuᵀ)·Wdᵀ`, then `logits = rmsnorm(x)·γ_f · Wheadᵀ`.
//! Attention is causal and grouped: query head `h` reads key/value head `h / (H/K)`.
//!
//! A chunk of many tokens (prefill, a perplexity window) multiplies panels of each weight with
//! `gemm` (`matmul_xwt_many`); one token (a decode step) streams each weight once through the
//! matrix-vector kernels, Q/K/V in one parallel region and gate/up in another. Every buffer
//! lives in the [`KvCache`], so a decode step allocates nothing. In the last layer only the
//! rows whose logits are wanted go past attention.

use super::cache::{KvCache, KvDtype};
use super::config::LlamaConfig;
use super::hessian::Hessians;
use super::linear::ModelWeights;
use super::quant::{ActStats, LinearSite};
use super::weights::LlamaWeights;
use crate::io::gguf::GgufFile;
use crate::model::ModelError;
use crate::nn::attention::{HeadLayout, Heads, HeadsMut};
use crate::nn::group_quant::GroupQuant;
use crate::nn::hadamard_rows::OnlineHadamard;
use crate::nn::qmatmul::matmul_xwt_many_with;
use crate::nn::qmatvec::{MatvecInput, Q8Vector, QMatrix, dequantize_rows};
use crate::nn::{attention_cached, rmsnorm, rope, simd, swiglu};

/// A model ready to run: weights, and what runs around them: QuaRot's online Hadamard
/// transforms, activation quantisation and activation statistics at the inputs of the linear
/// layers, and the type of the KV cache.
#[derive(Debug, Clone)]
pub struct Llama {
    pub(super) cfg: LlamaConfig,
    pub(super) w: ModelWeights,
    /// Quantise each decoder linear layer's input per token (round to nearest in groups,
    /// [`GroupQuant`]; `lm_head`'s input is left alone).
    pub act_quant: Option<GroupQuant>,
    /// When set, statistics of every linear layer's input are accumulated here.
    pub stats: Option<ActStats>,
    /// QuaRot's `R4`: an orthogonal map applied online to each row of `down_proj`'s input
    /// (`F` wide) before it is quantised; `w_down` must already hold `W_down·H` so the
    /// product is unchanged.
    pub down_hadamard: Option<OnlineHadamard>,
    /// QuaRot's `R3`: an orthogonal map of order `D` applied online to every query and key
    /// head after RoPE, so the KV cache holds rotated keys; scores `q·k` are unchanged.
    pub qk_hadamard: Option<OnlineHadamard>,
    /// When set, `XᵀX` of every decoder linear layer's input is accumulated here (GPTQ's
    /// calibration), after the online transform and before activation quantisation.
    pub hessians: Option<Hessians>,
    /// How the caches of [`new_cache`](Self::new_cache) store keys and values (f32 unless set).
    pub kv_dtype: KvDtype,
    /// What the products multiply quantised weights with (f32 unless set): `Q8` rounds the
    /// input of products of one or two rows (a decode step, and the head at the last prompt
    /// position), `Q8All` that of every product (prefills and evaluation windows too), for the
    /// types with integer dot products ([`crate::nn::qmatvec::q8_supports`]).
    pub dot: MatvecInput,
}

/// What a pass leaves in the cache's scratch.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// Logits of rows `from..T`.
    Logits { from: usize },
    /// The residual stream after `layer` layers (all of them when `layer ≥ L`).
    Hidden { layer: usize },
}

impl Llama {
    /// Wraps owned f32 weights (Hugging Face order) for inference.
    pub fn new(w: LlamaWeights) -> Self {
        Llama {
            cfg: w.cfg.clone(),
            w: ModelWeights::from_owned(w),
            act_quant: None,
            stats: None,
            down_hadamard: None,
            qk_hadamard: None,
            hessians: None,
            kv_dtype: KvDtype::F32,
            dot: MatvecInput::F32,
        }
    }

    /// A model whose weights stay in the GGUF file's mapping, in their stored types, with
    /// the online `down_proj` transform the file was written for, if any
    /// ([`super::online::down_hadamard_of`]).
    pub fn from_gguf(g: &GgufFile) -> crate::Result<Self> {
        let cfg = LlamaConfig::from_gguf(g)?;
        let w = ModelWeights::from_gguf(g, &cfg)?;
        Ok(Llama {
            down_hadamard: super::online::down_hadamard_of(g, &cfg)?,
            cfg,
            w,
            act_quant: None,
            stats: None,
            qk_hadamard: None,
            hessians: None,
            kv_dtype: KvDtype::F32,
            dot: MatvecInput::F32,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }

    /// The weights, as stored.
    pub fn weights(&self) -> &ModelWeights {
        &self.w
    }

    /// `V`.
    pub fn vocab_size(&self) -> usize {
        self.cfg.vocab_size
    }

    /// The longest context the model was trained for.
    pub fn context(&self) -> usize {
        self.cfg.max_context
    }

    /// An empty KV cache (with its scratch) for up to `cap` positions, `1 ≤ cap ≤ context`.
    pub fn new_cache(&self, cap: usize) -> crate::Result<KvCache> {
        KvCache::with_dtype(&self.cfg, cap, self.kv_dtype)
    }

    /// Runs `tokens` (positions `cache.len()..`) through the model, appends their keys and
    /// values to `cache`, and returns the logits (`(T − from) x V`, in the cache's scratch)
    /// of positions `from..T` of the chunk.
    pub fn prefill<'c>(
        &mut self,
        tokens: &[u32],
        cache: &'c mut KvCache,
        from: usize,
    ) -> crate::Result<&'c [f32]> {
        let from = from.min(tokens.len());
        on_pool(|| self.run(tokens, cache, Stop::Logits { from }))?;
        let n = (tokens.len() - from) * self.cfg.vocab_size;
        Ok(&cache.s.logits[..n])
    }

    /// One token at the next position: its logits (`V`). Allocates nothing.
    pub fn decode_one<'c>(
        &mut self,
        token: u32,
        cache: &'c mut KvCache,
    ) -> crate::Result<&'c [f32]> {
        self.prefill(&[token], cache, 0)
    }

    /// [`prefill`](Self::prefill), copied out.
    pub fn forward(
        &mut self,
        tokens: &[u32],
        cache: &mut KvCache,
        from: usize,
    ) -> crate::Result<Vec<f32>> {
        Ok(self.prefill(tokens, cache, from)?.to_vec())
    }

    /// The residual stream after `layer` layers (`T x C`; `0` is the embedding). Below `L` the
    /// pass stops there and the cache length is left as it was; at `L` or more it is the
    /// output of the last layer, before the final norm, and the cache advances.
    pub fn hidden_states(
        &mut self,
        tokens: &[u32],
        cache: &mut KvCache,
        layer: usize,
    ) -> crate::Result<Vec<f32>> {
        on_pool(|| self.run(tokens, cache, Stop::Hidden { layer }))?;
        Ok(cache.s.x[..tokens.len() * self.cfg.d_model].to_vec())
    }

    fn run(&mut self, tokens: &[u32], cache: &mut KvCache, stop: Stop) -> crate::Result<()> {
        self.run_from(tokens, cache, None, stop)
    }

    /// The pass from the embedding, or from the stream `x` entering layer `l` when `start`
    /// is `Some((l, x))` (earlier layers are skipped).
    pub(super) fn run_from(
        &mut self,
        tokens: &[u32],
        cache: &mut KvCache,
        start: Option<(usize, &[f32])>,
        stop: Stop,
    ) -> crate::Result<()> {
        let Llama {
            cfg,
            w,
            act_quant,
            stats,
            down_hadamard,
            qk_hadamard,
            hessians,
            dot,
            ..
        } = self;
        let (c, t, f) = (cfg.d_model, tokens.len(), cfg.d_ff);
        let (nh, nkv, dh) = (cfg.n_head, cfg.n_kv_head, cfg.head_dim());
        let (qd, kvd, half) = (nh * dh, nkv * dh, dh / 2);
        let p0 = cache.len;
        if t == 0 || p0 + t > cache.cap {
            return Err(ModelError::Config(format!(
                "context overflow: {p0} cached + {t} new positions (at least 1) exceed the \
                 cache of {}",
                cache.cap
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
        let from = match stop {
            Stop::Logits { from } => from,
            Stop::Hidden { .. } => t,
        };
        let KvCache {
            store,
            cos,
            sin,
            s,
            cap,
            ..
        } = cache;
        s.ensure(cfg, t, p0 + t, t - from);
        let mut hooks = Hooks {
            act_quant: *act_quant,
            stats,
            xq: &mut s.xq,
            hessians,
            layer: 0,
            dot: *dot,
            q8: &mut s.q8,
        };
        let had = &mut s.had;
        let (x, h) = (&mut s.x[..t * c], &mut s.h[..t * c]);
        let (q, att, y) = (&mut s.q[..t * qd], &mut s.att[..t * qd], &mut s.y[..t * c]);
        let (g, u) = (&mut s.g[..t * f], &mut s.u[..t * f]);
        let first = match start {
            Some((l0, x0)) => {
                x.copy_from_slice(x0);
                l0
            }
            None => {
                let embed = w.embed.view();
                for (row, &tok) in x.chunks_exact_mut(c).zip(tokens) {
                    dequantize_rows(row, embed.slice_rows(tok as usize..tok as usize + 1));
                }
                0
            }
        };
        let (cos, sin) = (
            &cos[p0 * half..(p0 + t) * half],
            &sin[p0 * half..(p0 + t) * half],
        );
        let eps = cfg.rms_eps;
        let scale = 1.0 / (dh as f32).sqrt();
        // Statistics count every row, so only a plain logits pass may drop rows.
        let trim = hooks.stats.is_none() && matches!(stop, Stop::Logits { .. });
        let n_layer = w.layers.len();
        for (l, layer) in w.layers.iter().enumerate() {
            if stop == (Stop::Hidden { layer: l }) {
                return Ok(());
            }
            if l < first {
                continue;
            }
            // Rows r0..t go past attention (all but the last layer need every row).
            let r0 = if trim && l + 1 == n_layer { from } else { 0 };
            let n = t - r0;
            hooks.layer = l;
            rmsnorm::forward(h, x, &layer.attn_norm, eps);
            let (kl, vl) = store.new_rows(l, p0 * kvd..(p0 + t) * kvd);
            let mut qkv = [
                (&mut q[..], layer.q.view()),
                (kl, layer.k.view()),
                (vl, layer.v.view()),
            ];
            hooks.linear(LinearSite::AttnIn, &mut qkv, h, t);
            let [(ql, _), (kl, _), (vl, _)] = qkv;
            if let Some(b) = &layer.qkv_bias {
                b.add(ql, kl, vl);
            }
            rope::apply(ql, qd, nh, dh, cos, sin, w.rope);
            rope::apply(kl, kvd, nkv, dh, cos, sin, w.rope);
            if let Some(r3) = qk_hadamard {
                r3.apply(ql, had);
                r3.apply(kl, had);
            }
            store.commit(l, p0 * kvd..(p0 + t) * kvd);
            let (ql, cl) = (HeadLayout::rows(n, qd, dh), HeadLayout::rows(*cap, kvd, dh));
            store.attend(
                l,
                p0,
                HeadsMut {
                    x: &mut att[r0 * qd..],
                    layout: ql,
                },
                &mut s.scores,
                Heads {
                    x: &q[r0 * qd..],
                    layout: ql,
                },
                cl,
                attention_cached::CachedDims {
                    b: 1,
                    h: nh,
                    kv_h: nkv,
                    t: n,
                    past: p0 + r0,
                    d: dh,
                },
                scale,
            );
            let (xr, hr, yr) = (&mut x[r0 * c..], &mut h[r0 * c..], &mut y[r0 * c..]);
            let (gr, ur) = (&mut g[..n * f], &mut u[..n * f]);
            hooks.linear(
                LinearSite::OIn,
                &mut [(yr, layer.o.view())],
                &att[r0 * qd..],
                n,
            );
            simd::add_assign_par(xr, yr);
            rmsnorm::forward(hr, xr, &layer.ffn_norm, eps);
            let mut gu = [(&mut gr[..], layer.gate.view()), (ur, layer.up.view())];
            hooks.linear(LinearSite::MlpIn, &mut gu, hr, n);
            swiglu::forward(gr, &u[..n * f]);
            if let Some(r4) = down_hadamard {
                r4.apply(gr, had);
            }
            hooks.linear(LinearSite::DownIn, &mut [(yr, layer.down.view())], gr, n);
            simd::add_assign_par(xr, yr);
        }
        cache.len = p0 + t;
        if let Stop::Logits { from } = stop {
            let rows = t - from;
            let hf = &mut s.h[..rows * c];
            rmsnorm::forward(hf, &s.x[from * c..t * c], &w.final_norm, eps);
            let logits = &mut s.logits[..rows * cfg.vocab_size];
            let mut head = [(logits, w.head().view())];
            let mut hooks = Hooks {
                act_quant: *act_quant,
                stats,
                xq: &mut s.xq,
                hessians,
                layer: n_layer,
                dot: *dot,
                q8: &mut s.q8,
            };
            hooks.linear(LinearSite::HeadIn, &mut head, hf, rows);
        }
        Ok(())
    }
}

/// Runs `f` on a thread of the rayon pool. A pass starts a hundred or more parallel loops (a
/// decode step: five per layer); started from a thread outside the pool, each would wait on
/// a lock and wake a worker (measured: 15% of a decode step's CPU time in the kernel's task
/// switching), while from inside the pool the calling worker takes part and the others are
/// still spinning between loops.
pub(super) fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| f())
}

/// The research hooks around every linear layer: statistics of its input, and simulated
/// quantisation of it.
struct Hooks<'a> {
    act_quant: Option<GroupQuant>,
    stats: &'a mut Option<ActStats>,
    xq: &'a mut Vec<f32>,
    hessians: &'a mut Option<Hessians>,
    /// The decoder layer being run (`L` for the head).
    layer: usize,
    /// What decode's matrix-vector products multiply the weights with.
    dot: MatvecInput,
    /// The rounded input of the integer products.
    q8: &'a mut Q8Vector,
}

impl Hooks<'_> {
    /// `y_j (rows x out_j) = x (rows x in) · W_jᵀ` for every job (the linear layers reading
    /// one input), after recording statistics of `x` and quantising it when asked.
    fn linear(
        &mut self,
        site: LinearSite,
        jobs: &mut [(&mut [f32], QMatrix)],
        x: &[f32],
        rows: usize,
    ) {
        let in_dim = jobs.first().map_or(0, |j| j.1.cols());
        if let Some(s) = self.stats.as_mut() {
            for _ in jobs.iter() {
                s.record(site, x, in_dim);
            }
        }
        if let Some(hs) = self.hessians.as_mut() {
            hs.record(self.layer, site, x, in_dim);
        }
        // lm_head's input stays in full precision, as in QuaRot.
        let x = match self.act_quant {
            Some(q) if site != LinearSite::HeadIn => {
                if self.xq.len() < x.len() {
                    self.xq.resize(x.len(), 0.0);
                }
                let xq = &mut self.xq[..x.len()];
                xq.copy_from_slice(x);
                q.fake_quant_rows(xq, in_dim);
                &*xq
            }
            _ => x,
        };
        matmul_xwt_many_with(jobs, x, rows, self.dot, self.q8);
    }
}
