//! Backward pass of [`Gpt`]: from the logits' gradient (left in the logits buffer by the fused
//! cross-entropy) down to the embeddings, accumulating into the gradient buffer. Frozen
//! `W_Q, W_K` get only their input-gradient product; their weight-gradient product is never
//! run. The gradient flows down the residual stream in `scratch.d_out` (at a block's output)
//! and `scratch.d_in` (at its input), swapped after each block.

use crate::model::attention_kind::{AttnWeight, Projection};
use crate::model::config::NormPlacement;
use crate::model::gpt::acts::{Acts, LayerActs, Scratch};
use crate::model::gpt::forward::{Site, block_output, rope_tables, site};
use crate::model::gpt::{Gpt, NormAt, Weights};
use crate::nn::matmul::{Trans, matmul};
use crate::nn::{attention, dropout, embedding, gelu, layernorm, linear, linear_attention, simd};

/// `dst = src ⊙ mask` (dropout backward into a scratch), or `src` itself without dropout.
fn masked<'a>(dst: &'a mut [f32], src: &'a [f32], mask: &[f32], drop: bool) -> &'a [f32] {
    if !drop {
        return src;
    }
    dst.copy_from_slice(src);
    dropout::backward(dst, mask);
    dst
}

impl Gpt {
    /// Backward after a training forward and the fused cross-entropy.
    pub(crate) fn backward(&mut self, inputs: &[u32], b: usize, t: usize) {
        let (w, grad, acts) = self.split();
        let (c, v, bt) = (w.cfg.d_model, w.cfg.vocab_size, b * t);
        let wte = w.wte..w.wte + v * c;
        let dlnf = &mut acts.scratch.branch[..bt * c];
        let (logits, lnf) = (&acts.logits[..bt * v], &acts.lnf[..bt * c]);
        head_backward(dlnf, grad, logits, lnf, w.data, wte, bt, c, v);
        w.backward_trunk(grad, acts, inputs, b, t);
    }

    /// Backward from the gradient of the final LayerNorm's output, left in
    /// `scratch.branch`.
    pub(crate) fn backward_trunk(&mut self, inputs: &[u32], b: usize, t: usize) {
        let (w, grad, acts) = self.split();
        w.backward_trunk(grad, acts, inputs, b, t);
    }
}

impl Weights<'_> {
    fn backward_trunk(&self, pg: &mut [f32], acts: &mut Acts, inputs: &[u32], b: usize, t: usize) {
        let cfg = self.cfg;
        let (c, v, bt) = (cfg.d_model, cfg.vocab_size, b * t);
        let n = bt * c;
        let sc = &mut acts.scratch;
        let last: &[f32] = match acts.layers.last() {
            None => &acts.x0[..n],
            Some(a) => block_output(cfg.norm, a, n),
        };
        let (dg, db) = norm_grads(pg, self.lnf, c);
        layernorm::backward(
            &mut sc.d_out[..n],
            dg,
            db,
            &sc.branch[..n],
            last,
            &acts.lnf_mean[..bt],
            &acts.lnf_rstd[..bt],
            self.norm(self.lnf).0,
            c,
            false,
        );
        let seed = acts.dropout_seed.unwrap_or(0);
        for l in (0..cfg.n_layer).rev() {
            let (prev, rest) = acts.layers.split_at(l);
            let x_in: &[f32] = match prev.last() {
                None => &acts.x0[..n],
                Some(a) => block_output(cfg.norm, a, n),
            };
            let step = Step { l, b, t, seed };
            self.block_backward(step, &rest[0], x_in, sc, pg);
            // This block's input gradient is the output gradient of the one below.
            std::mem::swap(&mut sc.d_out, &mut sc.d_in);
        }
        let drop = cfg.dropout > 0.0;
        let mask = &acts.mask_emb[..if drop { n } else { 0 }];
        let g = masked(&mut sc.branch[..n], &sc.d_out[..n], mask, drop);
        let wte = self.wte..self.wte + v * c;
        let pe = cfg.context * c;
        match self.wpe {
            Some(wpe) => {
                let (gte, gpe) = pg.split_at_mut(wpe.max(wte.end));
                embedding::backward(&mut gte[wte], Some(&mut gpe[..pe]), g, inputs, t, c);
            }
            None => embedding::backward(&mut pg[wte], None, g, inputs, t, c),
        }
    }

    /// `LayerNorm` backward at `n`: `dx` from `dy`, the norm's input `x` and saved statistics,
    /// accumulating `γ`, `β` gradients; `acc` adds into `dx` instead of overwriting it.
    #[allow(clippy::too_many_arguments)]
    fn norm_backward(
        &self,
        dx: &mut [f32],
        pg: &mut [f32],
        dy: &[f32],
        x: &[f32],
        (mean, rstd): (&[f32], &[f32]),
        n: NormAt,
        acc: bool,
    ) {
        let c = self.cfg.d_model;
        let (dg, db) = norm_grads(pg, n, c);
        let g = self.norm(n).0;
        layernorm::backward(dx, dg, db, dy, x, mean, rstd, g, c, acc);
    }

    /// One block: reads the output gradient from `sc.d_out`, writes the input gradient into
    /// `sc.d_in`.
    fn block_backward(
        &self,
        x: Step,
        a: &LayerActs,
        x_in: &[f32],
        sc: &mut Scratch,
        pg: &mut [f32],
    ) {
        let bt = x.b * x.t;
        let n = bt * self.cfg.d_model;
        let blk = &self.blocks[x.l];
        let stats1 = (&a.ln1_mean[..bt], &a.ln1_rstd[..bt]);
        let stats2 = (&a.ln2_mean[..bt], &a.ln2_rstd[..bt]);
        match self.cfg.norm {
            NormPlacement::Pre => {
                // res2 = res1 + mlp(LN2(res1)); res1 = x + attn(LN1(x)).
                self.mlp_backward(x, a, &a.ln2[..n], Held::DOut, sc, pg);
                let (d_res1, d_out) = (&mut sc.d_res1[..n], &sc.d_out[..n]);
                d_res1.copy_from_slice(d_out);
                let d_ln2 = &sc.d_branch_in[..n];
                self.norm_backward(d_res1, pg, d_ln2, &a.res1[..n], stats2, blk.ln2, true);
                self.attn_backward(x, a, &a.ln1[..n], Held::DRes1, sc, pg);
                let (d_in, d_res1) = (&mut sc.d_in[..n], &sc.d_res1[..n]);
                d_in.copy_from_slice(d_res1);
                let d_ln1 = &sc.d_branch_in[..n];
                self.norm_backward(d_in, pg, d_ln1, x_in, stats1, blk.ln1, true);
            }
            NormPlacement::Post => {
                // out = LN2(res2), res2 = h + mlp(h), h = LN1(res1), res1 = x + attn(x).
                // `d_res1` first holds d(res2); adding the branch's input gradient makes it d(h).
                let (d_res2, d_out) = (&mut sc.d_res1[..n], &sc.d_out[..n]);
                self.norm_backward(d_res2, pg, d_out, &a.res2[..n], stats2, blk.ln2, false);
                self.mlp_backward(x, a, &a.ln1[..n], Held::DRes1, sc, pg);
                let (d_h, d_mlp_in) = (&mut sc.d_res1[..n], &sc.d_branch_in[..n]);
                simd::add_assign_par(d_h, d_mlp_in);
                let (d_res1, d_h) = (&mut sc.d_ln1_in[..n], &sc.d_res1[..n]);
                self.norm_backward(d_res1, pg, d_h, &a.res1[..n], stats1, blk.ln1, false);
                self.attn_backward(x, a, x_in, Held::DLn1In, sc, pg);
                let (d_res1, d_attn_in) = (&sc.d_ln1_in[..n], &sc.d_branch_in[..n]);
                simd::add_par(&mut sc.d_in[..n], d_res1, d_attn_in);
            }
        }
    }

    /// Feed-forward branch: from its output gradient (in `dy`) to the gradient of its input
    /// `m_in`, written to `sc.d_branch_in`.
    fn mlp_backward(
        &self,
        x: Step,
        a: &LayerActs,
        m_in: &[f32],
        dy: Held,
        sc: &mut Scratch,
        pg: &mut [f32],
    ) {
        let (c, f, bt) = (self.cfg.d_model, self.cfg.d_ff, x.b * x.t);
        let (n, nf) = (bt * c, bt * f);
        let blk = &self.blocks[x.l];
        let (dy, rest) = dy.split(sc, n);
        let drop = self.cfg.dropout > 0.0;
        let dy = masked(&mut rest.branch[..n], dy, &a.mask_mlp, drop);
        let (d_gelu, d_fch) = (&mut rest.d_fch_gelu[..nf], &mut rest.d_fch[..nf]);
        linear::backward(
            Some(&mut *d_gelu),
            Some(&mut pg[blk.proj_w..blk.proj_w + c * f]),
            dy,
            &a.fch_gelu[..nf],
            self.at(blk.proj_w, c * f),
            bt,
            f,
            c,
            false,
        );
        if let Some(o) = blk.proj_b {
            linear::bias_backward(&mut pg[o..o + c], dy);
        }
        gelu::backward_form(self.cfg.gelu, d_fch, d_gelu, &a.fch[..nf]);
        linear::backward(
            Some(&mut rest.d_branch_in[..n]),
            Some(&mut pg[blk.fc_w..blk.fc_w + f * c]),
            d_fch,
            m_in,
            self.at(blk.fc_w, f * c),
            bt,
            c,
            f,
            false,
        );
        if let Some(o) = blk.fc_b {
            linear::bias_backward(&mut pg[o..o + f], d_fch);
        }
    }

    /// Attention branch: from its output gradient (in `dy`) to the gradient of its input
    /// `a_in`, written to `sc.d_branch_in`.
    fn attn_backward(
        &self,
        x: Step,
        a: &LayerActs,
        a_in: &[f32],
        dy: Held,
        sc: &mut Scratch,
        pg: &mut [f32],
    ) {
        let cfg = self.cfg;
        let (c, h, t, bt) = (cfg.d_model, cfg.n_head, x.t, x.b * x.t);
        let (n, d, cc) = (bt * c, c / h, c * c);
        let blk = &self.blocks[x.l];
        let (dy, rest) = dy.split(sc, n);
        let drop = cfg.dropout > 0.0;
        let dy = masked(&mut rest.branch[..n], dy, &a.mask_attn, drop);
        let spec = cfg.layer_spec(x.l);
        let lin = spec.is_linear();
        let nd = if lin { n } else { 0 };
        let (dq, dk, dv) = (&mut rest.dq[..n], &mut rest.dk[..n], &mut rest.dv[..n]);
        let (d_heads, d_att) = (&mut rest.d_heads[..nd], &mut *rest.d_att);
        // W_O: d(atty) into d_branch_in (as scratch until the Q, K, V products overwrite it).
        let da_in = &mut rest.d_branch_in[..n];
        let wo = blk.weight(AttnWeight::O).map(|o| o..o + cc);
        linear::backward(
            Some(&mut *da_in),
            wo.map(|r| &mut pg[r]),
            dy,
            &a.atty[..n],
            self.attn_weight(x.l, AttnWeight::O),
            bt,
            c,
            c,
            false,
        );
        if let Some(o) = blk.bias(AttnWeight::O) {
            linear::bias_backward(&mut pg[o..o + c], dy);
        }
        if lin {
            attention::split_heads(d_heads, da_in, t, h, d);
            linear_attention::causal_backward(
                dq,
                dk,
                dv,
                &a.norm[..bt * h],
                d_att,
                d_heads,
                &a.qh[..n],
                &a.kh[..n],
                &a.vh[..n],
                t,
                d,
            );
            linear_attention::feature_map_backward(d_heads, dq, &a.q_pre[..n]);
            dq.copy_from_slice(d_heads);
            linear_attention::feature_map_backward(d_heads, dk, &a.k_pre[..n]);
            dk.copy_from_slice(d_heads);
            // Back through the rotation: the gradients of the projections' outputs.
            if let Some(r) = rope_tables(cfg, t) {
                r.split(dq, x.b * h, true);
                r.split(dk, x.b * h, true);
            }
        } else {
            // Heads stay in the `(B, T, C)` rows: the attention reads d(atty) as it is and
            // writes dQ, dK, dV ready for the projections' backward.
            let bhtt = x.b * h * t * t;
            let lay = attention::HeadLayout::rows(t, c, d);
            let heads = |x| attention::Heads { x, layout: lay };
            let out = |x| attention::HeadsMut { x, layout: lay };
            let tau = blk.temperature.map(|o| self.at(o, h));
            let qs = tau.map(|tau| crate::model::gpt::temperature::scaled(&a.qh[..n], tau, d));
            attention::backward(
                attention::Grads {
                    dq: out(dq),
                    dk: out(dk),
                    dv: out(dv),
                },
                &mut d_att[..bhtt],
                heads(da_in),
                &a.att[..bhtt],
                heads(qs.as_deref().unwrap_or(&a.qh[..n])),
                heads(&a.kh[..n]),
                heads(&a.vh[..n]),
                attention::Dims { b: x.b, h, t, d },
                1.0 / (d as f32).sqrt(),
                drop.then(|| {
                    let base = dropout::site_base(x.seed, site(x.l, Site::AttnProbs));
                    (&a.att_drop[..bhtt], cfg.dropout, base)
                }),
            );
            if let (Some(o), Some(tau)) = (blk.temperature, tau) {
                crate::model::gpt::temperature::backward(dq, &mut pg[o..o + h], &a.qh[..n], tau, d);
            }
            if let Some(r) = rope_tables(cfg, t) {
                r.rows(dq, x.b, h, true);
                r.rows(dk, x.b, h, true);
            }
        }
        if spec.k == Projection::TiedToQ {
            // k = q: both gradients flow through the one projection.
            simd::add_assign_par(dq, dk);
        }
        let grads = [
            (AttnWeight::Q, &*dq),
            (AttnWeight::K, &*dk),
            (AttnWeight::V, &*dv),
        ];
        for (w, g) in grads {
            let g: &[f32] = if lin {
                attention::merge_heads(d_heads, g, t, h, d);
                d_heads
            } else {
                g
            };
            // Q overwrites d_branch_in (W_O's scratch until here); K and V add to it.
            let acc = w != AttnWeight::Q;
            match (spec.projection(w), self.fast(x.l, w)) {
                (Projection::TiedToQ, _) => continue,
                (Projection::Identity, _) if acc => simd::add_assign_par(da_in, g),
                (Projection::Identity, _) => da_in.copy_from_slice(g),
                (Projection::Hadamard, Some(fast)) => fast.backward(da_in, g, acc),
                _ => {
                    let wg = blk.weight(w).map(|o| o..o + cc);
                    linear::backward(
                        Some(&mut *da_in),
                        wg.map(|r| &mut pg[r]),
                        g,
                        a_in,
                        self.attn_weight(x.l, w),
                        bt,
                        c,
                        c,
                        acc,
                    );
                }
            }
            if let Some(o) = blk.bias(w) {
                linear::bias_backward(&mut pg[o..o + c], g);
            }
        }
    }
}

/// Which block a backward step runs, on which batch shape, and the forward's dropout seed.
#[derive(Clone, Copy)]
struct Step {
    l: usize,
    b: usize,
    t: usize,
    seed: u64,
}

/// The scratch buffer that holds a branch's output gradient.
#[derive(Clone, Copy)]
enum Held {
    /// `d_out`: the block's output gradient (pre-LN feed-forward).
    DOut,
    /// `d_res1`: pre-LN attention; post-LN feed-forward (where it holds d(res2)).
    DRes1,
    /// `d_ln1_in`: post-LN attention.
    DLn1In,
}

/// The other scratch buffers a branch's backward writes, borrowed apart from the one it
/// reads.
struct BranchScratch<'a> {
    branch: &'a mut Vec<f32>,
    d_branch_in: &'a mut Vec<f32>,
    dq: &'a mut Vec<f32>,
    dk: &'a mut Vec<f32>,
    dv: &'a mut Vec<f32>,
    d_heads: &'a mut Vec<f32>,
    d_fch_gelu: &'a mut Vec<f32>,
    d_fch: &'a mut Vec<f32>,
    d_att: &'a mut Vec<f32>,
}

impl Held {
    /// The first `n` values of the held gradient, and the buffers a branch writes.
    fn split(self, sc: &mut Scratch, n: usize) -> (&[f32], BranchScratch<'_>) {
        let Scratch {
            branch,
            d_out,
            d_in: _,
            d_res1,
            d_branch_in,
            d_ln1_in,
            dq,
            dk,
            dv,
            d_heads,
            d_fch_gelu,
            d_fch,
            d_att,
        } = sc;
        let dy = match self {
            Held::DOut => &d_out[..n],
            Held::DRes1 => &d_res1[..n],
            Held::DLn1In => &d_ln1_in[..n],
        };
        let rest = BranchScratch {
            branch,
            d_branch_in,
            dq,
            dk,
            dv,
            d_heads,
            d_fch_gelu,
            d_fch,
            d_att,
        };
        (dy, rest)
    }
}

/// The tied head's backward: `d lnf = dlogits · W_te` (into `dlnf`, `rows x C`) and
/// `dW_te += dlogitsᵀ · lnf`, for `rows` rows of logits.
#[allow(clippy::too_many_arguments)]
pub(crate) fn head_backward(
    dlnf: &mut [f32],
    pg: &mut [f32],
    dlogits: &[f32],
    lnf: &[f32],
    pd: &[f32],
    wte: std::ops::Range<usize>,
    rows: usize,
    c: usize,
    v: usize,
) {
    let threads = linear::big_threads();
    matmul(
        dlnf,
        dlogits,
        Trans::No,
        &pd[wte.clone()],
        Trans::No,
        rows,
        v,
        c,
        false,
        threads,
    );
    matmul(
        &mut pg[wte],
        dlogits,
        Trans::Yes,
        lnf,
        Trans::No,
        v,
        rows,
        c,
        true,
        threads,
    );
}

/// The gradients of a LayerNorm's `γ` and `β` (when it has one) in `pg`.
fn norm_grads(pg: &mut [f32], n: NormAt, c: usize) -> (&mut [f32], Option<&mut [f32]>) {
    match n.bias {
        Some(b) => {
            debug_assert_eq!(b, n.gain + c, "the store puts β right after γ");
            let (dg, db) = pg[n.gain..n.gain + 2 * c].split_at_mut(c);
            (dg, Some(db))
        }
        None => (&mut pg[n.gain..n.gain + c], None),
    }
}
