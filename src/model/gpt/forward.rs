//! Forward pass of [`Gpt`]: the weights are read through [`Weights`], the activations written
//! into the preallocated [`Acts`], the two borrowed apart.

use crate::model::attention_kind::{AttnWeight, Projection};
use crate::model::config::{NormPlacement, Position, ROPE_THETA};
use crate::model::gpt::acts::{Acts, LayerActs, Scratch};
use crate::model::gpt::rope::RopeTables;
use crate::model::gpt::{Gpt, Weights};
use crate::nn::{
    attention, dropout, embedding, gelu, layernorm, linear, linear_attention, matmul, simd,
};

/// Dropout sites: the embedding is 0, then three per layer.
#[derive(Clone, Copy)]
pub(crate) enum Site {
    /// The attention branch's output.
    AttnOut,
    /// The feed-forward branch's output.
    MlpOut,
    /// The attention probabilities.
    AttnProbs,
}

/// The dropout site number of `site` in block `layer`.
pub(crate) fn site(layer: usize, site: Site) -> u64 {
    1 + 3 * layer as u64 + site as u64
}

/// The output of a block: `res2` (pre-LN) or `LN2(res2)` (post-LN), its first `n` values.
pub(crate) fn block_output(norm: NormPlacement, a: &LayerActs, n: usize) -> &[f32] {
    match norm {
        NormPlacement::Pre => &a.res2[..n],
        NormPlacement::Post => &a.ln2[..n],
    }
}

impl Gpt {
    /// Runs the model up to the logits; `dropout_seed` is `Some` only when training with dropout.
    pub(crate) fn forward(
        &mut self,
        inputs: &[u32],
        b: usize,
        t: usize,
        dropout_seed: Option<u64>,
    ) {
        let (w, _, acts) = self.split();
        w.forward_trunk(acts, inputs, b, t, dropout_seed);
        w.head_forward(acts, b * t);
    }

    /// Runs the model up to the final LayerNorm's output `acts.lnf` (the head's input).
    pub(crate) fn forward_trunk(
        &mut self,
        inputs: &[u32],
        b: usize,
        t: usize,
        dropout_seed: Option<u64>,
    ) {
        let (w, _, acts) = self.split();
        w.forward_trunk(acts, inputs, b, t, dropout_seed);
    }
}

impl Weights<'_> {
    /// The tied head: `logits (rows x V) = lnf (rows x C) · W_teᵀ`.
    fn head_forward(&self, acts: &mut Acts, rows: usize) {
        let (c, v) = (self.cfg.d_model, self.cfg.vocab_size);
        head_product(
            &mut acts.logits[..rows * v],
            &acts.lnf[..rows * c],
            self.wte(),
            rows,
            c,
            v,
        );
    }

    /// Runs the blocks up to the final LayerNorm's output `acts.lnf`.
    fn forward_trunk(
        &self,
        acts: &mut Acts,
        inputs: &[u32],
        b: usize,
        t: usize,
        dropout_seed: Option<u64>,
    ) {
        let c = self.cfg.d_model;
        let bt = b * t;
        let n = bt * c;
        embedding::forward(
            &mut acts.x0[..n],
            inputs,
            self.wte(),
            self.wpe.map(|o| &self.data[o..o + self.cfg.context * c]),
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
                Some(pl) => block_output(self.cfg.norm, pl, n),
            };
            let step = BlockStep {
                l,
                b,
                t,
                dropout_seed,
            };
            self.block_forward(step, x_in, &mut rest[0], &mut acts.scratch);
        }
        let last = acts
            .layers
            .last()
            .map(|pl| block_output(self.cfg.norm, pl, n))
            .unwrap_or(&acts.x0[..n]);
        let (g, beta) = self.norm(self.lnf);
        let (lnf, mean, rstd) = (
            &mut acts.lnf[..n],
            &mut acts.lnf_mean[..bt],
            &mut acts.lnf_rstd[..bt],
        );
        layernorm::forward(lnf, mean, rstd, last, g, beta, c);
        acts.dropout_seed = dropout_seed;
        acts.last = Some((b, t));
    }

    /// Projection `w` (Q, K or V) of block `l` of the attention input `x` into `out`
    /// (`B·T x C`): a product with the weight, the input itself (identity queries), or the
    /// fast Hadamard transform. Tied keys are copied from the queries by the caller.
    fn project(&self, l: usize, w: AttnWeight, out: &mut [f32], x: &[f32], bt: usize) {
        let c = self.cfg.d_model;
        let bias = self.attn_bias(l, w);
        match (self.cfg.layer_kind(l).projection(w), self.fast(l, w)) {
            (Projection::Identity, _) => out.copy_from_slice(x),
            (Projection::Hadamard, Some(fast)) => {
                fast.forward(out, x);
                if let Some(b) = bias {
                    linear::add_bias(out, b);
                }
            }
            _ => linear::forward(out, x, self.attn_weight(l, w), bias, bt, c, c),
        }
    }

    /// Block `step.l` on its input `x_in` (`B·T x C`), saving its activations in `a`.
    fn block_forward(&self, step: BlockStep, x_in: &[f32], a: &mut LayerActs, sc: &mut Scratch) {
        let BlockStep {
            l,
            b,
            t,
            dropout_seed,
        } = step;
        let cfg = self.cfg;
        let (c, f, h) = (cfg.d_model, cfg.d_ff, cfg.n_head);
        let (bt, d) = (b * t, cfg.d_head());
        let n = bt * c;
        let blk = &self.blocks[l];
        let pre = cfg.norm == NormPlacement::Pre;
        let (ln1, ln1_b) = self.norm(blk.ln1);
        let (ln2, ln2_b) = self.norm(blk.ln2);
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
        let spec = cfg.layer_spec(l);
        let lin = spec.is_linear();
        if lin {
            let qkv = [AttnWeight::Q, AttnWeight::K, AttnWeight::V];
            for (w, dst) in qkv.into_iter().zip([&mut a.qh, &mut a.kh, &mut a.vh]) {
                self.project(l, w, &mut sc.branch[..n], a_in, bt);
                attention::split_heads(&mut dst[..n], &sc.branch[..n], t, h, d);
            }
            // Rotary positions act on the projections, before the feature map.
            if let Some(r) = rope_tables(cfg, t) {
                r.split(&mut a.qh[..n], b * h, false);
                r.split(&mut a.kh[..n], b * h, false);
            }
        } else {
            self.project(l, AttnWeight::Q, &mut a.qh[..n], a_in, bt);
            if spec.k == Projection::TiedToQ {
                a.kh[..n].copy_from_slice(&a.qh[..n]);
            } else {
                self.project(l, AttnWeight::K, &mut a.kh[..n], a_in, bt);
            }
            self.project(l, AttnWeight::V, &mut a.vh[..n], a_in, bt);
            if let Some(r) = rope_tables(cfg, t) {
                r.rows(&mut a.qh[..n], b, h, false);
                r.rows(&mut a.kh[..n], b, h, false);
            }
        }
        let scale = 1.0 / (d as f32).sqrt();
        if lin {
            a.q_pre[..n].copy_from_slice(&a.qh[..n]);
            a.k_pre[..n].copy_from_slice(&a.kh[..n]);
            linear_attention::feature_map(&mut a.qh[..n], &a.q_pre[..n]);
            linear_attention::feature_map(&mut a.kh[..n], &a.k_pre[..n]);
            linear_attention::causal_forward(
                &mut sc.d_out[..n],
                &mut a.norm[..bt * h],
                &a.qh[..n],
                &a.kh[..n],
                &a.vh[..n],
                &mut sc.d_att,
                t,
                d,
            );
            attention::merge_heads(&mut a.atty[..n], &sc.d_out[..n], t, h, d);
        } else {
            let bhtt = b * h * t * t;
            let drop = dropout_seed.map(|seed| attention::ProbDropout {
                att_drop: &mut a.att_drop[..bhtt],
                p: cfg.dropout,
                base: dropout::site_base(seed, site(l, Site::AttnProbs)),
            });
            let att = &mut a.att[..bhtt];
            let lay = attention::HeadLayout::rows(t, c, d);
            let heads = |x| attention::Heads { x, layout: lay };
            let dims = attention::Dims { b, h, t, d };
            // A learned temperature scales each head's queries (a copy: `qh` stays unscaled).
            let tau = blk.temperature.map(|o| self.at(o, h));
            let qs = tau.map(|tau| crate::model::gpt::temperature::scaled(&a.qh[..n], tau, d));
            attention::forward(
                attention::HeadsMut {
                    x: &mut a.atty[..n],
                    layout: lay,
                },
                att,
                heads(qs.as_deref().unwrap_or(&a.qh[..n])),
                heads(&a.kh[..n]),
                heads(&a.vh[..n]),
                dims,
                scale,
                drop,
            );
        }
        let branch = &mut sc.branch[..n];
        linear::forward(
            branch,
            &a.atty[..n],
            self.attn_weight(l, AttnWeight::O),
            self.attn_bias(l, AttnWeight::O),
            bt,
            c,
            c,
        );
        if let Some(seed) = dropout_seed {
            let p = cfg.dropout;
            let mask = &mut a.mask_attn[..n];
            dropout::forward(branch, mask, p, seed, site(l, Site::AttnOut));
        }
        simd::add_par(&mut a.res1[..n], x_in, branch);
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
        let opt = |o: Option<usize>, len| o.map(|o| self.at(o, len));
        linear::forward(
            &mut a.fch[..nf],
            m_in,
            self.at(blk.fc_w, f * c),
            opt(blk.fc_b, f),
            bt,
            c,
            f,
        );
        gelu::forward_form(cfg.gelu, &mut a.fch_gelu[..nf], &a.fch[..nf]);
        linear::forward(
            branch,
            &a.fch_gelu[..nf],
            self.at(blk.proj_w, c * f),
            opt(blk.proj_b, c),
            bt,
            f,
            c,
        );
        if let Some(seed) = dropout_seed {
            let p = cfg.dropout;
            let mask = &mut a.mask_mlp[..n];
            dropout::forward(branch, mask, p, seed, site(l, Site::MlpOut));
        }
        let base: &[f32] = if pre { &a.res1[..n] } else { &a.ln1[..n] };
        simd::add_par(&mut a.res2[..n], base, branch);
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

/// The rotary tables of a batch of `t` positions, for a model with rotary positions.
pub(crate) fn rope_tables(cfg: &crate::model::GptConfig, t: usize) -> Option<RopeTables> {
    (cfg.position == Position::Rope).then(|| RopeTables::new(t, cfg.d_head(), ROPE_THETA))
}

/// Which block a forward step runs, on which batch shape, with which dropout seed.
#[derive(Clone, Copy)]
struct BlockStep {
    l: usize,
    b: usize,
    t: usize,
    dropout_seed: Option<u64>,
}

/// `logits (rows x V) = x (rows x C) · W_teᵀ`, the tied head (also run on scored rows only
/// by the masked loss).
pub(crate) fn head_product(
    logits: &mut [f32],
    x: &[f32],
    wte: &[f32],
    rows: usize,
    c: usize,
    v: usize,
) {
    use matmul::Trans;
    let threads = linear::big_threads();
    matmul::matmul(
        logits,
        x,
        Trans::No,
        wte,
        Trans::Yes,
        rows,
        c,
        v,
        false,
        threads,
    );
}
