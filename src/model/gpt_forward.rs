//! Forward pass of [`Gpt`] into its preallocated activation buffers.

use super::config::{NormPlacement, Projection};
use super::gpt::{Gpt, LayerIdx};
use super::gpt_acts::LayerActs;
use super::store::FrozenStore;
use crate::nn::{
    attention, dropout, embedding, gelu, layernorm, linear, linear_attention, matmul, simd,
};

/// The weight `which` (0 Q, 1 K, 2 V, 3 O) of a layer, see [`Gpt::attn_weight`].
pub(crate) fn attn_weight<'a>(
    p: &'a [f32],
    frozen: &'a FrozenStore,
    idx: &LayerIdx,
    c: usize,
    which: usize,
) -> &'a [f32] {
    if let Some(o) = idx.w[which] {
        return &p[o..o + c * c];
    }
    // Tied keys share the queries' frozen tensor.
    let slot = idx.frozen[which.min(1)].or(idx.frozen[0]);
    slot.map_or(&[], |i| &frozen.tensors[i].data)
}

/// Dropout site numbers: the embedding is 0, then three per layer (attention output,
/// feed-forward output, attention probabilities).
pub(crate) fn site(layer: usize, which: usize) -> u64 {
    1 + 3 * layer as u64 + which as u64
}

impl Gpt {
    /// The weight `which` (0 Q, 1 K, 2 V, 3 O) of layer `l`: from the store or the frozen store
    /// (tied keys use the queries' tensor; identity queries have none and get an empty slice).
    pub(crate) fn attn_weight(&self, l: usize, which: usize) -> &[f32] {
        attn_weight(
            &self.params.data,
            &self.frozen,
            &self.layers[l],
            self.cfg.d_model,
            which,
        )
    }

    /// Projection `which` (0 Q, 1 K, 2 V) of layer `l` of the attention input `x` into `out`
    /// (`B·T x C`): a product with the weight, the input itself (identity queries), or the
    /// fast Hadamard transform. Tied keys are copied from the queries by the caller.
    fn project(&self, l: usize, which: usize, out: &mut [f32], x: &[f32], bt: usize) {
        let (c, idx) = (self.cfg.d_model, &self.layers[l]);
        let proj = if which < 2 {
            self.cfg.attention.projection(which)
        } else {
            Projection::Trainable
        };
        let p = &self.params.data;
        let bias = idx.b[which].map(|o| &p[o..o + c]);
        let fast = idx.frozen.get(which).copied().flatten();
        match (
            proj,
            fast.and_then(|i| self.frozen.tensors[i].fast.as_ref()),
        ) {
            (Projection::Identity, _) => out.copy_from_slice(x),
            (Projection::Hadamard, Some(fast)) => {
                fast.forward(out, x);
                if let Some(b) = bias {
                    linear::add_bias(out, b);
                }
            }
            _ => linear::forward(out, x, self.attn_weight(l, which), bias, bt, c, c),
        }
    }

    /// Runs the model up to the logits; `dropout_seed` is `Some` only when training with dropout.
    pub(crate) fn forward(
        &mut self,
        inputs: &[u32],
        b: usize,
        t: usize,
        dropout_seed: Option<u64>,
    ) {
        self.forward_trunk(inputs, b, t, dropout_seed);
        let Some(mut acts) = self.acts.take() else {
            return;
        };
        let (c, v, bt) = (self.cfg.d_model, self.cfg.vocab_size, b * t);
        let wte = &self.params.data[self.wte..self.wte + v * c];
        matmul::matmul(
            &mut acts.logits[..bt * v],
            &acts.lnf[..bt * c],
            matmul::Trans::No,
            wte,
            matmul::Trans::Yes,
            bt,
            c,
            v,
            false,
            linear::big_threads(),
        );
        self.acts = Some(acts);
    }

    /// Runs the model up to the final LayerNorm's output `acts.lnf` (the head's input).
    pub(crate) fn forward_trunk(
        &mut self,
        inputs: &[u32],
        b: usize,
        t: usize,
        dropout_seed: Option<u64>,
    ) {
        let Some(mut acts) = self.acts.take() else {
            return;
        };
        let (c, v) = (self.cfg.d_model, self.cfg.vocab_size);
        let (bt, p) = (b * t, &self.params.data);
        let n = bt * c;
        embedding::forward(
            &mut acts.x0[..n],
            inputs,
            &p[self.wte..self.wte + v * c],
            &p[self.wpe..],
            t,
            c,
        );
        if let Some(seed) = dropout_seed {
            dropout::forward(
                &mut acts.x0[..n],
                &mut acts.mask_emb[..n],
                self.cfg.dropout,
                seed,
                0,
            );
        }
        for l in 0..self.cfg.n_layer {
            let (prev, rest) = acts.layers.split_at_mut(l);
            let x_in: &[f32] = match prev.last() {
                None => &acts.x0[..n],
                Some(pl) => self.block_output(pl, n),
            };
            self.block_forward(
                l,
                x_in,
                &mut rest[0],
                &mut acts.s,
                &mut acts.dp,
                b,
                t,
                dropout_seed,
            );
        }
        let last = acts
            .layers
            .last()
            .map(|pl| self.block_output(pl, n))
            .unwrap_or(&acts.x0[..n]);
        let g = &p[self.lnf..self.lnf + c];
        let beta = self.lnf_b.map(|o| &p[o..o + c]);
        let (lnf, mean, rstd) = (
            &mut acts.lnf[..n],
            &mut acts.lnf_mean[..bt],
            &mut acts.lnf_rstd[..bt],
        );
        layernorm::forward(lnf, mean, rstd, last, g, beta, c);
        acts.dropout_seed = dropout_seed;
        self.acts = Some(acts);
    }

    /// The output of a block: `res2` (pre-LN) or `LN2(res2)` (post-LN).
    pub(crate) fn block_output<'a>(&self, a: &'a LayerActs, n: usize) -> &'a [f32] {
        match self.cfg.norm {
            NormPlacement::Pre => &a.res2[..n],
            NormPlacement::Post => &a.ln2[..n],
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn block_forward(
        &self,
        l: usize,
        x_in: &[f32],
        a: &mut LayerActs,
        s: &mut [Vec<f32>; 6],
        scratch: &mut [f32],
        b: usize,
        t: usize,
        dropout_seed: Option<u64>,
    ) {
        let cfg = &self.cfg;
        let (c, f, h) = (cfg.d_model, cfg.d_ff, cfg.n_head);
        let (bt, d) = (b * t, cfg.d_head());
        let n = bt * c;
        let p = &self.params.data;
        let idx: &LayerIdx = &self.layers[l];
        let pre = cfg.norm == NormPlacement::Pre;
        let bias = |o: Option<usize>, len: usize| o.map(|o| &p[o..o + len]);
        let (ln1, ln1_b) = (&p[idx.ln1..idx.ln1 + c], bias(idx.ln1_b, c));
        let (ln2, ln2_b) = (&p[idx.ln2..idx.ln2 + c], bias(idx.ln2_b, c));
        if pre {
            layernorm::forward(
                &mut a.ln1[..n],
                &mut a.ln1_mean[..bt],
                &mut a.ln1_rstd[..bt],
                x_in,
                ln1,
                ln1_b,
                c,
            );
        }
        let a_in: &[f32] = if pre { &a.ln1[..n] } else { x_in };
        // Q, K, V projections: softmax attention reads the heads straight from the `(B, T, C)`
        // rows; linear attention wants them split into `(B, H, T, D)`.
        let [s0, s1, ..] = s;
        let lin = cfg.attention.is_linear();
        if lin {
            for (which, dst) in [(0, &mut a.qh), (1, &mut a.kh), (2, &mut a.vh)] {
                self.project(l, which, &mut s0[..n], a_in, bt);
                attention::split_heads(&mut dst[..n], &s0[..n], t, h, d);
            }
        } else {
            self.project(l, 0, &mut a.qh[..n], a_in, bt);
            if cfg.attention.k_projection() == Projection::TiedToQ {
                a.kh[..n].copy_from_slice(&a.qh[..n]);
            } else {
                self.project(l, 1, &mut a.kh[..n], a_in, bt);
            }
            self.project(l, 2, &mut a.vh[..n], a_in, bt);
        }
        let scale = 1.0 / (d as f32).sqrt();
        if lin {
            a.q_pre[..n].copy_from_slice(&a.qh[..n]);
            a.k_pre[..n].copy_from_slice(&a.kh[..n]);
            linear_attention::feature_map(&mut a.qh[..n], &a.q_pre[..n]);
            linear_attention::feature_map(&mut a.kh[..n], &a.k_pre[..n]);
            linear_attention::causal_forward(
                &mut s1[..n],
                &mut a.norm[..bt * h],
                &a.qh[..n],
                &a.kh[..n],
                &a.vh[..n],
                scratch,
                t,
                d,
            );
            attention::merge_heads(&mut a.atty[..n], &s1[..n], t, h, d);
        } else {
            let bhtt = b * h * t * t;
            let drop = dropout_seed.map(|seed| attention::ProbDropout {
                att_drop: &mut a.att_drop[..bhtt],
                p: cfg.dropout,
                base: dropout::site_base(seed, site(l, 2)),
            });
            let att = &mut a.att[..bhtt];
            let lay = attention::HeadLayout::rows(t, c, d);
            let heads = |x| attention::Heads { x, layout: lay };
            let dims = attention::Dims { b, h, t, d };
            attention::forward(
                attention::HeadsMut {
                    x: &mut a.atty[..n],
                    layout: lay,
                },
                att,
                heads(&a.qh[..n]),
                heads(&a.kh[..n]),
                heads(&a.vh[..n]),
                dims,
                scale,
                drop,
            );
        }
        linear::forward(
            &mut s0[..n],
            &a.atty[..n],
            self.attn_weight(l, 3),
            bias(idx.b[3], c),
            bt,
            c,
            c,
        );
        if let Some(seed) = dropout_seed {
            dropout::forward(
                &mut s0[..n],
                &mut a.mask_attn[..n],
                cfg.dropout,
                seed,
                site(l, 0),
            );
        }
        simd::add_par(&mut a.res1[..n], x_in, &s0[..n]);
        // Feed-forward on LN2(res1) (pre) or on h = LN1(res1) (post).
        let m_in: &[f32] = if pre {
            layernorm::forward(
                &mut a.ln2[..n],
                &mut a.ln2_mean[..bt],
                &mut a.ln2_rstd[..bt],
                &a.res1[..n],
                ln2,
                ln2_b,
                c,
            );
            &a.ln2[..n]
        } else {
            layernorm::forward(
                &mut a.ln1[..n],
                &mut a.ln1_mean[..bt],
                &mut a.ln1_rstd[..bt],
                &a.res1[..n],
                ln1,
                ln1_b,
                c,
            );
            &a.ln1[..n]
        };
        let nf = bt * f;
        linear::forward(
            &mut a.fch[..nf],
            m_in,
            &p[idx.fc_w..idx.fc_w + f * c],
            bias(idx.fc_b, f),
            bt,
            c,
            f,
        );
        gelu::forward_form(cfg.gelu, &mut a.fch_gelu[..nf], &a.fch[..nf]);
        linear::forward(
            &mut s0[..n],
            &a.fch_gelu[..nf],
            &p[idx.proj_w..idx.proj_w + c * f],
            bias(idx.proj_b, c),
            bt,
            f,
            c,
        );
        if let Some(seed) = dropout_seed {
            dropout::forward(
                &mut s0[..n],
                &mut a.mask_mlp[..n],
                cfg.dropout,
                seed,
                site(l, 1),
            );
        }
        let base: &[f32] = if pre { &a.res1[..n] } else { &a.ln1[..n] };
        simd::add_par(&mut a.res2[..n], base, &s0[..n]);
        if !pre {
            layernorm::forward(
                &mut a.ln2[..n],
                &mut a.ln2_mean[..bt],
                &mut a.ln2_rstd[..bt],
                &a.res2[..n],
                ln2,
                ln2_b,
                c,
            );
        }
    }
}
