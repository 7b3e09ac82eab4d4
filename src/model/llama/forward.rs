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

use super::cache::{KvCache, KvDtype, Scratch, grow};
use super::config::LlamaConfig;
use super::hooks::Hooks;
use super::linear::{Layer, ModelWeights};
use super::segment::Segment;
use super::tap::{LinearSite, LinearTap};
use super::weights::LlamaWeights;
use crate::io::gguf::GgufFile;
use crate::model::ModelError;
use crate::nn::attention::{HeadLayout, Heads, HeadsMut};
use crate::nn::group_quant::GroupQuant;
use crate::nn::hadamard_rows::OnlineHadamard;
use crate::nn::qmatvec::{MatvecInput, dequantize_rows};
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
    /// What observes every linear layer's input, when set ([`Llama::set_tap`]): a study's
    /// statistics, GPTQ's Hessians.
    tap: Option<Box<dyn LinearTap>>,
    /// QuaRot's `R4`: an orthogonal map applied online to each row of `down_proj`'s input
    /// (`F` wide) before it is quantised; `w_down` must already hold `W_down·H` so the
    /// product is unchanged.
    pub down_hadamard: Option<OnlineHadamard>,
    /// QuaRot's `R3`: an orthogonal map of order `D` applied online to every query and key
    /// head after RoPE, so the KV cache holds rotated keys; scores `q·k` are unchanged.
    pub qk_hadamard: Option<OnlineHadamard>,
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
    /// Logits of each segment's last row ([`Llama::run_segments`]).
    LastRows,
}

impl Llama {
    /// Wraps owned f32 weights (Hugging Face order) for inference.
    pub fn new(w: LlamaWeights) -> Self {
        Llama {
            cfg: w.cfg.clone(),
            w: ModelWeights::from_owned(w),
            act_quant: None,
            tap: None,
            down_hadamard: None,
            qk_hadamard: None,
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
            tap: None,
            qk_hadamard: None,
            kv_dtype: KvDtype::F32,
            dot: MatvecInput::F32,
        })
    }

    /// Sets `tap` to observe every linear layer's input in the passes that follow (it
    /// replaces the tap set before, if any).
    pub fn set_tap<T: LinearTap>(&mut self, tap: T) {
        self.tap = Some(Box::new(tap));
    }

    /// The tap set by [`Llama::set_tap`], with what it recorded, if it is a `T`; the model
    /// runs without one afterwards. `None` (and the tap dropped) when none was set or it was
    /// another type.
    pub fn take_tap<T: LinearTap>(&mut self) -> Option<T> {
        self.tap.take()?.into_any().downcast().ok().map(|b| *b)
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
        let KvCache {
            store,
            len,
            cap,
            cos,
            sin,
            s,
        } = cache;
        let mut seg = [Segment {
            store,
            cos,
            sin,
            p0: *len,
            cap: *cap,
            rows: 0..tokens.len(),
        }];
        self.run_segments(tokens, &mut seg, s, start, stop)?;
        if !matches!(stop, Stop::Hidden { layer } if layer < self.cfg.n_layer) {
            *len += tokens.len();
        }
        Ok(())
    }

    /// One pass over the rows of every segment, stacked in `tokens` (each segment's rows run
    /// after the positions its store holds): the linear layers multiply all rows at once,
    /// RoPE and attention run per segment over its own cache. `s` is the pass's scratch.
    /// Several segments take [`Stop::LastRows`] only, and the caller advances their lengths.
    pub(super) fn run_segments(
        &mut self,
        tokens: &[u32],
        segs: &mut [Segment<'_>],
        s: &mut Scratch,
        start: Option<(usize, &[f32])>,
        stop: Stop,
    ) -> crate::Result<()> {
        let Llama {
            cfg,
            w,
            act_quant,
            tap,
            down_hadamard,
            qk_hadamard,
            dot,
            ..
        } = self;
        let (c, t, f) = (cfg.d_model, tokens.len(), cfg.d_ff);
        let (nh, nkv, dh) = (cfg.n_head, cfg.n_kv_head, cfg.head_dim());
        let (qd, kvd, half) = (nh * dh, nkv * dh, dh / 2);
        let multi = segs.len() > 1;
        assert!(
            !segs.is_empty() && (!multi || (stop == Stop::LastRows && start.is_none())),
            "run_segments: several segments run from the embedding to their last rows' logits"
        );
        for g in segs.iter() {
            let n = g.rows.len();
            if n == 0 || g.p0 + n > g.cap {
                return Err(ModelError::Config(format!(
                    "context overflow: {} cached + {n} new positions (at least 1) exceed the \
                     cache of {}",
                    g.p0, g.cap
                ))
                .into());
            }
        }
        if let Some(&bad) = tokens.iter().find(|&&x| x as usize >= cfg.vocab_size) {
            return Err(ModelError::Config(format!(
                "token id {bad} is outside the vocabulary of {}",
                cfg.vocab_size
            ))
            .into());
        }
        let (from, logit_rows) = match stop {
            Stop::Logits { from } => (from, t - from),
            Stop::Hidden { .. } => (t, 0),
            Stop::LastRows => (0, segs.len()),
        };
        let scores = segs
            .iter()
            .map(|g| nh * g.rows.len() * (g.p0 + g.rows.len()))
            .max()
            .unwrap_or(0);
        s.ensure(cfg, t, scores, logit_rows);
        if multi {
            grow(&mut s.k, t * kvd);
            grow(&mut s.v, t * kvd);
        }
        // A batch of decode steps (one row per segment) multiplies as decode steps do.
        let dot = match *dot {
            MatvecInput::Q8 if multi && t == segs.len() => MatvecInput::Q8All,
            d => d,
        };
        let mut hooks = Hooks {
            act_quant: *act_quant,
            tap,
            xq: &mut s.xq,
            layer: 0,
            dot,
            q8: &mut s.q8,
        };
        let had = &mut s.had;
        let (x, h) = (&mut s.x[..t * c], &mut s.h[..t * c]);
        let (q, att, y) = (&mut s.q[..t * qd], &mut s.att[..t * qd], &mut s.y[..t * c]);
        let (g, u) = (&mut s.g[..t * f], &mut s.u[..t * f]);
        let (kb, vb) = (&mut s.k, &mut s.v);
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
        let eps = cfg.rms_eps;
        let scale = 1.0 / (dh as f32).sqrt();
        // Only a logits pass whose tap (if any) can miss rows may drop them.
        let trim = hooks.tap.as_ref().is_none_or(|t| !t.needs_every_row())
            && matches!(stop, Stop::Logits { .. });
        // RoPE at positions p0.. of `ql`'s and `kl`'s rows, then QuaRot's R3 when set.
        let qk_hadamard = &*qk_hadamard;
        let rope_rows = |(cos, sin, p0): (&[f32], &[f32], usize),
                         ql: &mut [f32],
                         kl: &mut [f32],
                         had: &mut Vec<f32>| {
            let at = p0 * half..p0 * half + kl.len() / kvd * half;
            let (cos, sin) = (&cos[at.clone()], &sin[at]);
            rope::apply(ql, qd, nh, dh, cos, sin, w.rope);
            rope::apply(kl, kvd, nkv, dh, cos, sin, w.rope);
            if let Some(r3) = qk_hadamard {
                r3.apply(ql, had);
                r3.apply(kl, had);
            }
        };
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
            if multi {
                // Keys and values of every segment in scratch, then into each one's store.
                let (kl, vl) = (&mut kb[..t * kvd], &mut vb[..t * kvd]);
                project_qkv(&mut hooks, layer, [&mut q[..], kl, vl], h, t);
                for seg in segs.iter_mut() {
                    let (a, b) = (seg.rows.start, seg.rows.end);
                    let (kr, vr) = (&mut kb[a * kvd..b * kvd], &vb[a * kvd..b * kvd]);
                    rope_rows(seg.angles(), &mut q[a * qd..b * qd], kr, had);
                    let (sk, sv) = seg.store.new_rows(l, seg.kv_rows(kvd));
                    sk.copy_from_slice(kr);
                    sv.copy_from_slice(vr);
                }
            } else {
                // One segment writes its keys and values straight into its store.
                let seg = &mut segs[0];
                let (angles, at) = (seg.angles(), seg.kv_rows(kvd));
                let (kl, vl) = seg.store.new_rows(l, at);
                project_qkv(&mut hooks, layer, [&mut q[..], &mut *kl, vl], h, t);
                rope_rows(angles, q, kl, had);
            }
            for seg in segs.iter_mut() {
                seg.store.commit(l, seg.kv_rows(kvd));
                let (a, b) = (seg.rows.start + r0, seg.rows.end);
                let ql = HeadLayout::rows(b - a, qd, dh);
                let cl = HeadLayout::rows(seg.cap, kvd, dh);
                seg.store.attend(
                    l,
                    seg.p0,
                    HeadsMut {
                        x: &mut att[a * qd..b * qd],
                        layout: ql,
                    },
                    &mut s.scores,
                    Heads {
                        x: &q[a * qd..b * qd],
                        layout: ql,
                    },
                    cl,
                    attention_cached::CachedDims {
                        b: 1,
                        h: nh,
                        kv_h: nkv,
                        t: b - a,
                        past: seg.p0 + r0,
                        d: dh,
                    },
                    scale,
                );
            }
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
        let rows = match stop {
            Stop::Hidden { .. } => return Ok(()),
            Stop::Logits { from } => {
                rmsnorm::forward(
                    &mut s.h[..(t - from) * c],
                    &s.x[from * c..t * c],
                    &w.final_norm,
                    eps,
                );
                t - from
            }
            Stop::LastRows => {
                for (hf, seg) in s.h.chunks_exact_mut(c).zip(segs.iter()) {
                    let last = (seg.rows.end - 1) * c;
                    rmsnorm::forward(hf, &s.x[last..last + c], &w.final_norm, eps);
                }
                segs.len()
            }
        };
        let logits = &mut s.logits[..rows * cfg.vocab_size];
        let mut head = [(logits, w.head().view())];
        let mut hooks = Hooks {
            act_quant: *act_quant,
            tap,
            xq: &mut s.xq,
            layer: n_layer,
            // Each segment's last row is the one a decode step or a prompt's end would score.
            dot: if stop == Stop::LastRows && dot == MatvecInput::Q8 {
                MatvecInput::Q8All
            } else {
                dot
            },
            q8: &mut s.q8,
        };
        hooks.linear(LinearSite::HeadIn, &mut head, &s.h[..rows * c], rows);
        Ok(())
    }
}

/// `q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ` (+ biases) for `t` rows.
fn project_qkv(
    hooks: &mut Hooks<'_>,
    layer: &Layer,
    [q, k, v]: [&mut [f32]; 3],
    h: &[f32],
    t: usize,
) {
    let mut qkv = [
        (q, layer.q.view()),
        (k, layer.k.view()),
        (v, layer.v.view()),
    ];
    hooks.linear(LinearSite::AttnIn, &mut qkv, h, t);
    if let Some(b) = &layer.qkv_bias {
        let [(q, _), (k, _), (v, _)] = qkv;
        b.add(q, k, v);
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
