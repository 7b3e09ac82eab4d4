//! Backward pass of [`Gpt`]: from the logits' gradient (left in the logits buffer by the fused
//! cross-entropy) down to the embeddings, accumulating into `params.grad`. Frozen `W_Q, W_K`
//! get only their input-gradient product; their weight-gradient product is never run.

use super::config::{AttentionKind, NormPlacement, Projection};
use super::gpt::{Gpt, LayerIdx};
use super::gpt_acts::LayerActs;
use super::store::FrozenStore;
use crate::nn::matmul::{Trans, matmul};
use crate::nn::{attention, dropout, embedding, gelu, layernorm, linear, linear_attention, simd};

/// Read-only context of one block's backward.
struct Ctx<'a> {
    pd: &'a [f32],
    frozen: &'a FrozenStore,
    idx: &'a LayerIdx,
    l: usize,
    b: usize,
    t: usize,
    c: usize,
    f: usize,
    h: usize,
    drop: bool,
    /// Dropout probability and the seed of the forward (attention-probability masks).
    p: f32,
    seed: u64,
    linear_attn: bool,
    attention: AttentionKind,
    gelu: crate::nn::gelu::Gelu,
}

impl Ctx<'_> {
    fn weight(&self, which: usize) -> &[f32] {
        super::gpt_forward::attn_weight(self.pd, self.frozen, self.idx, self.c, which)
    }
}

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
        let Some(mut acts) = self.acts.take() else {
            return;
        };
        let (c, v, bt) = (self.cfg.d_model, self.cfg.vocab_size, b * t);
        let wte = self.wte..self.wte + v * c;
        let (pd, pg) = (&self.params.data, &mut self.params.grad);
        let s0 = &mut acts.s[0][..bt * c];
        head_backward(
            s0,
            pg,
            &acts.logits[..bt * v],
            &acts.lnf[..bt * c],
            pd,
            wte,
            bt,
            c,
            v,
        );
        self.acts = Some(acts);
        self.backward_trunk(inputs, b, t);
    }

    /// Backward from the gradient of the final LayerNorm's output, left in `acts.s[0]`.
    pub(crate) fn backward_trunk(&mut self, inputs: &[u32], b: usize, t: usize) {
        let Some(mut acts) = self.acts.take() else {
            return;
        };
        let cfg = &self.cfg;
        let (c, v, bt) = (cfg.d_model, cfg.vocab_size, b * t);
        let n = bt * c;
        let (pd, pg) = (&self.params.data, &mut self.params.grad);
        let wte = self.wte..self.wte + v * c;
        {
            let [s0, s1, ..] = &mut acts.s;
            let last: &[f32] = match acts.layers.last() {
                None => &acts.x0[..n],
                Some(a) => block_out(cfg.norm, a, n),
            };
            let (dg, db) = ln_grads(pg, self.lnf, self.lnf_b, c);
            let g = &pd[self.lnf..self.lnf + c];
            layernorm::backward(
                &mut s1[..n],
                dg,
                db,
                &s0[..n],
                last,
                &acts.lnf_mean[..bt],
                &acts.lnf_rstd[..bt],
                g,
                c,
                false,
            );
        }
        for l in (0..cfg.n_layer).rev() {
            let (prev, rest) = acts.layers.split_at(l);
            let x_in: &[f32] = match prev.last() {
                None => &acts.x0[..n],
                Some(a) => block_out(cfg.norm, a, n),
            };
            let ctx = Ctx {
                pd,
                frozen: &self.frozen,
                idx: &self.layers[l],
                l,
                b,
                t,
                c,
                f: cfg.d_ff,
                h: cfg.n_head,
                drop: cfg.dropout > 0.0,
                p: cfg.dropout,
                seed: acts.dropout_seed.unwrap_or(0),
                linear_attn: cfg.attention.is_linear(),
                attention: cfg.attention,
                gelu: cfg.gelu,
            };
            block_backward(
                &ctx,
                cfg.norm,
                &rest[0],
                x_in,
                &mut acts.s,
                &mut acts.dh,
                &mut acts.df,
                &mut acts.dp,
                pg,
            );
            acts.s.swap(1, 2);
        }
        let [s0, s1, ..] = &mut acts.s;
        let g = masked(
            &mut s0[..n],
            &s1[..n],
            &acts.mask_emb[..if cfg.dropout > 0.0 { n } else { 0 }],
            cfg.dropout > 0.0,
        );
        let (gte, gpe) = pg.split_at_mut(self.wpe.max(self.wte + v * c));
        embedding::backward(&mut gte[wte], &mut gpe[..cfg.context * c], g, inputs, t, c);
        self.acts = Some(acts);
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

/// The gradients of a LayerNorm's `γ` (at `g`) and `β` (at `b`, when it has one) in `pg`.
fn ln_grads(
    pg: &mut [f32],
    g: usize,
    b: Option<usize>,
    c: usize,
) -> (&mut [f32], Option<&mut [f32]>) {
    match b {
        Some(b) => {
            debug_assert_eq!(b, g + c, "the store puts β right after γ");
            let (dg, db) = pg[g..g + 2 * c].split_at_mut(c);
            (dg, Some(db))
        }
        None => (&mut pg[g..g + c], None),
    }
}

fn block_out(norm: NormPlacement, a: &LayerActs, n: usize) -> &[f32] {
    match norm {
        NormPlacement::Pre => &a.res2[..n],
        NormPlacement::Post => &a.ln2[..n],
    }
}

/// One block: reads the output gradient from `s[1]`, writes the input gradient into `s[2]`.
#[allow(clippy::too_many_arguments)]
fn block_backward(
    x: &Ctx,
    norm: NormPlacement,
    a: &LayerActs,
    x_in: &[f32],
    s: &mut [Vec<f32>; 6],
    dh: &mut [Vec<f32>; 4],
    df: &mut [Vec<f32>; 2],
    dp: &mut [f32],
    pg: &mut [f32],
) {
    let (c, bt) = (x.c, x.b * x.t);
    let n = bt * c;
    let [s0, s1, s2, s3, s4, s5] = s;
    let (s0, s1, s2, s3, s4, s5) = (
        &mut s0[..n],
        &s1[..n],
        &mut s2[..n],
        &mut s3[..n],
        &mut s4[..n],
        &mut s5[..n],
    );
    let (l1, l2) = ((x.idx.ln1, x.idx.ln1_b), (x.idx.ln2, x.idx.ln2_b));
    let ln_back = |dx: &mut [f32],
                   pg: &mut [f32],
                   dy: &[f32],
                   xx: &[f32],
                   mean: &[f32],
                   rstd: &[f32],
                   (at, at_b): (usize, Option<usize>),
                   acc: bool| {
        let (dg, db) = ln_grads(pg, at, at_b, c);
        layernorm::backward(
            dx,
            dg,
            db,
            dy,
            xx,
            &mean[..bt],
            &rstd[..bt],
            &x.pd[at..at + c],
            c,
            acc,
        );
    };
    match norm {
        NormPlacement::Pre => {
            mlp_backward(x, a, &a.ln2[..n], s1, s4, s0, df, pg);
            s3.copy_from_slice(s1);
            ln_back(s3, pg, s4, &a.res1[..n], &a.ln2_mean, &a.ln2_rstd, l2, true);
            attn_backward(x, a, &a.ln1[..n], s3, s4, s0, dh, dp, pg);
            s2.copy_from_slice(s3);
            ln_back(s2, pg, s4, x_in, &a.ln1_mean, &a.ln1_rstd, l1, true);
        }
        NormPlacement::Post => {
            ln_back(
                s3,
                pg,
                s1,
                &a.res2[..n],
                &a.ln2_mean,
                &a.ln2_rstd,
                l2,
                false,
            );
            mlp_backward(x, a, &a.ln1[..n], s3, s4, s0, df, pg);
            simd::add_assign_par(s3, s4);
            ln_back(
                s5,
                pg,
                s3,
                &a.res1[..n],
                &a.ln1_mean,
                &a.ln1_rstd,
                l1,
                false,
            );
            attn_backward(x, a, x_in, s5, s4, s0, dh, dp, pg);
            simd::add_par(s2, s5, s4);
        }
    }
}

/// Feed-forward branch: from the branch-output gradient `dy` to `d m_in` (overwritten).
#[allow(clippy::too_many_arguments)]
fn mlp_backward(
    x: &Ctx,
    a: &LayerActs,
    m_in: &[f32],
    dy: &[f32],
    dm_in: &mut [f32],
    tmp: &mut [f32],
    df: &mut [Vec<f32>; 2],
    pg: &mut [f32],
) {
    let (c, f, bt) = (x.c, x.f, x.b * x.t);
    let nf = bt * f;
    let idx = x.idx;
    let dy = masked(tmp, dy, &a.mask_mlp, x.drop);
    let [d0, d1] = df;
    let (d0, d1) = (&mut d0[..nf], &mut d1[..nf]);
    let pw = &x.pd[idx.proj_w..idx.proj_w + c * f];
    linear::backward(
        Some(d0),
        Some(&mut pg[idx.proj_w..idx.proj_w + c * f]),
        dy,
        &a.fch_gelu[..nf],
        pw,
        bt,
        f,
        c,
        false,
    );
    if let Some(o) = idx.proj_b {
        linear::bias_backward(&mut pg[o..o + c], dy);
    }
    gelu::backward_form(x.gelu, d1, d0, &a.fch[..nf]);
    let fw = &x.pd[idx.fc_w..idx.fc_w + f * c];
    linear::backward(
        Some(dm_in),
        Some(&mut pg[idx.fc_w..idx.fc_w + f * c]),
        d1,
        m_in,
        fw,
        bt,
        c,
        f,
        false,
    );
    if let Some(o) = idx.fc_b {
        linear::bias_backward(&mut pg[o..o + f], d1);
    }
}

/// Attention branch: from the branch-output gradient `dy` to `d a_in` (overwritten).
#[allow(clippy::too_many_arguments)]
fn attn_backward(
    x: &Ctx,
    a: &LayerActs,
    a_in: &[f32],
    dy: &[f32],
    da_in: &mut [f32],
    tmp: &mut [f32],
    dh: &mut [Vec<f32>; 4],
    dp: &mut [f32],
    pg: &mut [f32],
) {
    let (c, h, t, bt) = (x.c, x.h, x.t, x.b * x.t);
    let (n, d, cc) = (bt * c, c / h, c * c);
    let idx = x.idx;
    let dy = masked(tmp, dy, &a.mask_attn, x.drop);
    // W_O: d atty into da_in (as scratch), then split into heads.
    let wo_grad = idx.w[3].map(|o| o..o + cc);
    linear::backward(
        Some(da_in),
        wo_grad.map(|r| &mut pg[r]),
        dy,
        &a.atty[..n],
        x.weight(3),
        bt,
        c,
        c,
        false,
    );
    if let Some(o) = idx.b[3] {
        linear::bias_backward(&mut pg[o..o + c], dy);
    }
    let [dq, dk, dv, dout] = dh;
    let nd = if x.linear_attn { n } else { 0 };
    let (dq, dk, dv, dout) = (&mut dq[..n], &mut dk[..n], &mut dv[..n], &mut dout[..nd]);
    if x.linear_attn {
        attention::split_heads(dout, da_in, t, h, d);
        let den = &a.norm[..bt * h];
        linear_attention::causal_backward(
            dq,
            dk,
            dv,
            den,
            dp,
            dout,
            &a.qh[..n],
            &a.kh[..n],
            &a.vh[..n],
            t,
            d,
        );
        linear_attention::feature_map_backward(dout, dq, &a.q_pre[..n]);
        dq.copy_from_slice(dout);
        linear_attention::feature_map_backward(dout, dk, &a.k_pre[..n]);
        dk.copy_from_slice(dout);
    } else {
        // Heads stay in the `(B, T, C)` rows: the attention reads d(atty) as it is and
        // writes dQ, dK, dV ready for the projections' backward.
        let scale = 1.0 / (d as f32).sqrt();
        let att = &a.att[..x.b * h * t * t];
        let lay = attention::HeadLayout::rows(t, c, d);
        let heads = |x| attention::Heads { x, layout: lay };
        let out = |x| attention::HeadsMut { x, layout: lay };
        attention::backward(
            attention::Grads {
                dq: out(dq),
                dk: out(dk),
                dv: out(dv),
            },
            &mut dp[..x.b * h * t * t],
            heads(da_in),
            att,
            heads(&a.qh[..n]),
            heads(&a.kh[..n]),
            heads(&a.vh[..n]),
            attention::Dims { b: x.b, h, t, d },
            scale,
            x.drop.then(|| {
                let base = dropout::site_base(x.seed, super::gpt_forward::site(x.l, 2));
                (&a.att_drop[..x.b * h * t * t], x.p, base)
            }),
        );
    }
    let kind = x.attention;
    if kind.k_projection() == Projection::TiedToQ {
        // k = q: both gradients flow through the one projection.
        simd::add_assign_par(dq, dk);
    }
    for (which, g) in [(0, &*dq), (1, &*dk), (2, &*dv)] {
        let g: &[f32] = if x.linear_attn {
            attention::merge_heads(dout, g, t, h, d);
            dout
        } else {
            g
        };
        let proj = if which < 2 {
            kind.projection(which)
        } else {
            Projection::Trainable
        };
        let acc = which > 0;
        let fast = idx.frozen.get(which).copied().flatten();
        match (proj, fast.and_then(|i| x.frozen.tensors[i].fast.as_ref())) {
            (Projection::TiedToQ, _) => continue,
            (Projection::Identity, _) if acc => simd::add_assign_par(da_in, g),
            (Projection::Identity, _) => da_in.copy_from_slice(g),
            (Projection::Hadamard, Some(fast)) => fast.backward(da_in, g, acc),
            _ => {
                let wg = idx.w[which].map(|o| o..o + cc);
                let w = x.weight(which);
                linear::backward(
                    Some(&mut *da_in),
                    wg.map(|r| &mut pg[r]),
                    g,
                    a_in,
                    w,
                    bt,
                    c,
                    c,
                    acc,
                );
            }
        }
        if let Some(o) = idx.b[which] {
            linear::bias_backward(&mut pg[o..o + c], g);
        }
    }
}
