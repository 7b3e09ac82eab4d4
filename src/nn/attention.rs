//! Causal softmax attention, one rayon task per `(b, h)`, over heads in any strided layout
//! ([`Heads`]): `(B, H, T, D)`, or straight in the projections' `(B, T, C)` rows, so the
//! model needs no split/merge copies.
//!
//! Forward: `S = Q·Kᵀ·scale`, `P = softmax(S + causal mask)` (saved), `O = P·V`.
//! Backward: `dP = dO·Vᵀ`, `dV = Pᵀ·dO`, `dS = P ⊙ (dP - rowsum(P ⊙ dP))·scale`,
//! `dQ = dS·K`, `dK = dSᵀ·Q`.

use super::dropout;
use super::matmul::{Operand, Trans, matmul_raw, matmul_strided};
use super::simd::{self, dispatch};
use rayon::prelude::*;

/// `(B, T, H·D)` → `(B, H, T, D)`.
pub fn split_heads(out: &mut [f32], x: &[f32], t: usize, h: usize, d: usize) {
    out.par_chunks_mut(t * d).enumerate().for_each(|(bh, o)| {
        let (bi, hi) = (bh / h, bh % h);
        for ti in 0..t {
            let src = &x[(bi * t + ti) * h * d + hi * d..][..d];
            o[ti * d..(ti + 1) * d].copy_from_slice(src);
        }
    });
}

/// `(B, H, T, D)` → `(B, T, H·D)`.
pub fn merge_heads(out: &mut [f32], x: &[f32], t: usize, h: usize, d: usize) {
    out.par_chunks_mut(h * d).enumerate().for_each(|(bt, o)| {
        let (bi, ti) = (bt / t, bt % t);
        for hi in 0..h {
            let src = &x[((bi * h + hi) * t + ti) * d..][..d];
            o[hi * d..(hi + 1) * d].copy_from_slice(src);
        }
    });
}

/// Dropout on the attention probabilities: `P_drop = P ⊙ mask`, masks from
/// `dropout::mask_at(base, bh·T² + i, p)`; `att_drop (B, H, T, T)` keeps `P_drop`.
pub struct ProbDropout<'a> {
    /// Dropped probabilities, written by the forward, read by the backward.
    pub att_drop: &'a mut [f32],
    /// Drop probability.
    pub p: f32,
    /// Mask stream (`dropout::site_base`).
    pub base: u64,
}

/// Where the per-head `T x D` matrices of a `(B, H)` batch live in a buffer: element
/// `(b, h, t, j)` is at `b·batch + h·head + t·row + j`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadLayout {
    /// Elements between batch items.
    pub batch: usize,
    /// Elements between heads.
    pub head: usize,
    /// Elements between time steps (the leading dimension of each head's matrix).
    pub row: usize,
}

impl HeadLayout {
    /// Heads split out: `(B, H, T, D)`.
    pub fn split(t: usize, h: usize, d: usize) -> Self {
        HeadLayout {
            batch: h * t * d,
            head: t * d,
            row: d,
        }
    }

    /// Heads as column blocks of `(B, T, ld)` rows (`ld = C`, or `3C` for a fused QKV buffer).
    pub fn rows(t: usize, ld: usize, d: usize) -> Self {
        HeadLayout {
            batch: t * ld,
            head: d,
            row: ld,
        }
    }

    fn at(&self, b: usize, h: usize) -> usize {
        b * self.batch + h * self.head
    }

    /// Elements a buffer must hold for `(B, H, T, D)`.
    fn extent(&self, dims: Dims) -> usize {
        let Dims { b, h, t, d } = dims;
        if b * h * t * d == 0 {
            return 0;
        }
        (b - 1) * self.batch + (h - 1) * self.head + (t - 1) * self.row + d
    }
}

/// Shape of an attention call: batch, heads, time steps, head width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Batch `B`.
    pub b: usize,
    /// Heads `H`.
    pub h: usize,
    /// Time steps `T`.
    pub t: usize,
    /// Head width `D`.
    pub d: usize,
}

/// A read-only head tensor.
#[derive(Clone, Copy, Debug)]
pub struct Heads<'a> {
    /// The buffer.
    pub x: &'a [f32],
    /// Its layout.
    pub layout: HeadLayout,
}

/// A head tensor written by the kernels.
#[derive(Debug)]
pub struct HeadsMut<'a> {
    /// The buffer.
    pub x: &'a mut [f32],
    /// Its layout.
    pub layout: HeadLayout,
}

/// An output pointer shared by the `(b, h)` tasks, which write disjoint elements.
#[derive(Clone, Copy)]
struct Out(*mut f32, HeadLayout);
// SAFETY: every task writes only its own head's elements (see `HeadLayout::at`).
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Out {
    fn new(x: HeadsMut, dims: Dims) -> Self {
        assert!(
            x.x.len() >= x.layout.extent(dims),
            "attention: output too short"
        );
        Out(x.x.as_mut_ptr(), x.layout)
    }

    /// `op(a)·op(b)` into rows `r0..r0+m` of head `(bi, hi)`.
    ///
    /// # Safety
    /// Only the task that owns head `(bi, hi)` may call it.
    #[allow(clippy::too_many_arguments)]
    unsafe fn product(
        &self,
        bi: usize,
        hi: usize,
        r0: usize,
        a: Operand,
        b: Operand,
        mkn: (usize, usize, usize),
        acc: bool,
    ) {
        let at = self.1.at(bi, hi) + r0 * self.1.row;
        // SAFETY: in bounds by the extent check in `new`; exclusive to this head's task.
        unsafe { matmul_raw(self.0.add(at), self.1.row, a, b, mkn, acc, 1.0, 1) }
    }
}

impl Heads<'_> {
    /// Head `(bi, hi)` from row `r0` on, as a matrix operand.
    fn op(&self, bi: usize, hi: usize, r0: usize, t: Trans) -> Operand<'_> {
        let at = self.layout.at(bi, hi) + r0 * self.layout.row;
        Operand {
            x: &self.x[at..],
            ld: self.layout.row,
            t,
        }
    }
}

/// Rows per causal block: scores are computed only for blocks on or below the diagonal, so
/// `T = 256` computes 10 of 16 blocks (62.5%) of `Q·Kᵀ`, `P·V` and their backward products.
const BLOCK: usize = 64;

/// `(first row, end row)` of each causal row block of a `t`-row head.
fn blocks(t: usize) -> impl DoubleEndedIterator<Item = (usize, usize)> {
    (0..t.div_ceil(BLOCK)).map(move |i| (i * BLOCK, ((i + 1) * BLOCK).min(t)))
}

/// Query-key pairs whose scores a `t`-step head computes (the causal blocks: `t²` would be
/// the full square, `t(t+1)/2` the exact triangle); `None` when the count overflows.
///
/// In closed form: full block `i` (of `n = ⌊t/64⌋`) has 64 rows reading `64(i+1)` keys, so
/// the full blocks read `64²·n(n+1)/2`, and a last partial block of `r = t mod 64` rows reads
/// all `t` (the sum over `blocks`, without a loop, for any `t`).
pub fn causal_pairs(t: usize) -> Option<usize> {
    let (n, r) = (t / BLOCK, t % BLOCK);
    let triangle = if n % 2 == 0 {
        (n / 2).checked_mul(n + 1)?
    } else {
        n.checked_mul(n.div_ceil(2))?
    };
    (BLOCK * BLOCK)
        .checked_mul(triangle)?
        .checked_add(r.checked_mul(t)?)
}

/// A row-major `rows x ld` matrix as a plain or transposed operand.
fn op(x: &[f32], ld: usize, t: Trans) -> Operand<'_> {
    Operand { x, ld, t }
}

/// Forward for all `(b, h)`: fills `att (B, H, T, T)` with the probabilities and `o`
/// (`O = P·V`, or `O = P_drop·V` with dropout). Only the causal part of `att` is written: row
/// `i` holds `P[i, 0..=i]` and zeros up to the end of its row block; entries beyond are never
/// read.
#[allow(clippy::too_many_arguments)]
pub fn forward(
    o: HeadsMut,
    att: &mut [f32],
    q: Heads,
    k: Heads,
    v: Heads,
    dims: Dims,
    scale: f32,
    drop: Option<ProbDropout>,
) {
    let Dims { h, t, d, .. } = dims;
    let tt = t * t;
    for x in [&q, &k, &v] {
        assert!(
            x.x.len() >= x.layout.extent(dims),
            "attention: input too short"
        );
    }
    let o = Out::new(o, dims);
    let (dp, base) = drop.as_ref().map_or((0.0, 0), |x| (x.p, x.base));
    let body = |bh: usize, p: &mut [f32], mut pdrop: Option<&mut [f32]>| {
        let (bi, hi) = (bh / h, bh % h);
        for (r0, r1) in blocks(t) {
            let rows = r1 - r0;
            let s = &mut p[r0 * t..];
            let (qb, kt) = (q.op(bi, hi, r0, Trans::No), k.op(bi, hi, 0, Trans::Yes));
            matmul_strided(s, t, qb, kt, (rows, d, r1), false, scale, 1);
            for (i, row) in (r0..r1).zip(s.chunks_mut(t)) {
                let (live, masked) = row[..r1].split_at_mut(i + 1);
                let mx = simd::max(live);
                let sum = simd::exp_shifted_sum(live, mx);
                simd::scale(live, 1.0 / sum);
                masked.fill(0.0);
            }
            let probs: &[f32] = match pdrop.as_deref_mut() {
                Some(pd) => {
                    for i in r0..r1 {
                        let (src, dst) = (&p[i * t..][..r1], &mut pd[i * t..][..r1]);
                        for (j, (x, &pv)) in dst.iter_mut().zip(src).enumerate() {
                            *x = pv * dropout::mask_at(base, bh * tt + i * t + j, dp);
                        }
                    }
                    &pd[r0 * t..]
                }
                None => &p[r0 * t..],
            };
            let vb = v.op(bi, hi, 0, Trans::No);
            // SAFETY: this task owns head (bi, hi).
            unsafe {
                o.product(
                    bi,
                    hi,
                    r0,
                    op(probs, t, Trans::No),
                    vb,
                    (rows, r1, d),
                    false,
                )
            };
        }
    };
    let att = &mut att[..dims.b * h * tt];
    match drop {
        Some(x) => att
            .par_chunks_mut(tt)
            .zip(x.att_drop.par_chunks_mut(tt))
            .enumerate()
            .for_each(|(bh, (p, pd))| body(bh, p, Some(pd))),
        None => att
            .par_chunks_mut(tt)
            .enumerate()
            .for_each(|(bh, p)| body(bh, p, None)),
    }
}

/// The outputs of [`backward`], overwritten.
pub struct Grads<'a> {
    /// `dQ`.
    pub dq: HeadsMut<'a>,
    /// `dK`.
    pub dk: HeadsMut<'a>,
    /// `dV`.
    pub dv: HeadsMut<'a>,
}

/// Backward for all `(b, h)`: overwrites `dq, dk, dv`; `dp (B, H, T, T)` is scratch. With
/// dropout (`drop = Some((att_drop, p, base))`): `dV = P_dropᵀ·dO` and `dP = (dO·Vᵀ) ⊙ mask`.
/// Row blocks run last to first: the last block spans every key, so it overwrites `dK, dV`
/// and the others accumulate.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    grads: Grads,
    dp: &mut [f32],
    dout: Heads,
    att: &[f32],
    q: Heads,
    k: Heads,
    v: Heads,
    dims: Dims,
    scale: f32,
    drop: Option<(&[f32], f32, u64)>,
) {
    let Dims { h, t, d, .. } = dims;
    let tt = t * t;
    for x in [&dout, &q, &k, &v] {
        assert!(
            x.x.len() >= x.layout.extent(dims),
            "attention: input too short"
        );
    }
    let (dq, dk, dv) = (
        Out::new(grads.dq, dims),
        Out::new(grads.dk, dims),
        Out::new(grads.dv, dims),
    );
    let dp = &mut dp[..dims.b * h * tt];
    dp.par_chunks_mut(tt).enumerate().for_each(|(bh, ds)| {
        let (bi, hi) = (bh / h, bh % h);
        let p = &att[bh * tt..][..tt];
        for (r0, r1) in blocks(t).rev() {
            let (rows, acc) = (r1 - r0, r1 < t);
            let dob = dout.op(bi, hi, r0, Trans::No);
            let s = &mut ds[r0 * t..];
            let vt = v.op(bi, hi, 0, Trans::Yes);
            matmul_strided(s, t, dob, vt, (rows, d, r1), false, 1.0, 1);
            let pv = match drop {
                Some((pd, prob, base)) => {
                    for (i, row) in (r0..r1).zip(s.chunks_mut(t)) {
                        for (j, x) in row[..r1].iter_mut().enumerate() {
                            *x *= dropout::mask_at(base, bh * tt + i * t + j, prob);
                        }
                    }
                    &pd[bh * tt + r0 * t..]
                }
                None => &p[r0 * t..],
            };
            // SAFETY (all three products below): this task owns head (bi, hi).
            unsafe { dv.product(bi, hi, 0, op(pv, t, Trans::Yes), dob, (r1, rows, d), acc) };
            for (i, (dr, pr)) in (r0..r1).zip(s.chunks_mut(t).zip(p[r0 * t..].chunks(t))) {
                let dot = simd::dot(&dr[..=i], &pr[..=i]);
                softmax_grad_row(&mut dr[..=i], &pr[..=i], dot, scale);
                dr[i + 1..r1].fill(0.0);
            }
            let s = &ds[r0 * t..];
            let kb = k.op(bi, hi, 0, Trans::No);
            unsafe { dq.product(bi, hi, r0, op(s, t, Trans::No), kb, (rows, r1, d), false) };
            let qb = q.op(bi, hi, r0, Trans::No);
            unsafe { dk.product(bi, hi, 0, op(s, t, Trans::Yes), qb, (r1, rows, d), acc) };
        }
    });
}

dispatch! {
    /// `ds[j] = p[j]·(ds[j] - dot)·scale`: the softmax backward of one row.
    fn softmax_grad_row(ds: &mut [f32], p: &[f32], dot: f32, scale: f32) {
        for (x, pv) in ds.iter_mut().zip(p) {
            *x = pv * (*x - dot) * scale;
        }
    }
}
