//! Causal softmax attention over a key/value cache, for inference: `T` new queries at absolute
//! positions `past..past+T` attend to the `past + T` cached keys and values (the new ones
//! included), with grouped-query heads (query head `h` reads key/value head
//! `h / (H / H_kv)`, Hugging Face's `repeat_kv` and llama.cpp's GQA). `past = 0` and
//! `H_kv = H` is the training forward of [`attention`](super::attention) without saving `P`.
//!
//! Prefill (`T > 1`) runs the same per-head causal row-block kernel as training
//! (`attention::head_forward`: GEMMs over the blocks on or below the diagonal). A decode step
//! (`T = 1`) is a row of dot products and a weighted sum of value rows, which gemm would pay
//! more to set up than to compute.

use rayon::prelude::*;

use super::attention::{Dims, HeadAt, Heads, HeadsMut, Out, head_forward};
use super::{attention_decode, simd};

/// Shape of a cached attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedDims {
    /// Batch `B` (sequences, each with its own cache rows).
    pub b: usize,
    /// Query heads `H`.
    pub h: usize,
    /// Key/value heads `H_kv` (`H` is a multiple).
    pub kv_h: usize,
    /// New queries `T`.
    pub t: usize,
    /// Positions already cached before these queries.
    pub past: usize,
    /// Head width `D`.
    pub d: usize,
}

impl CachedDims {
    /// Floats of the `scores` scratch [`forward`] needs: `B·H·T·(past + T)`.
    pub fn scores_len(&self) -> usize {
        self.b * self.h * self.t * (self.past + self.t)
    }
}

/// `O = softmax(Q·Kᵀ·scale + causal mask)·V` for the `T` queries of `q` (heads of `T` rows)
/// over the `past + T` rows of `k` and `v` (heads of at least `past + T` rows, `H_kv` of
/// them). `scores` is scratch of at least [`CachedDims::scores_len`] floats. Heads run in
/// parallel; results do not depend on the thread count.
pub fn forward(
    o: HeadsMut,
    scores: &mut [f32],
    q: Heads,
    k: Heads,
    v: Heads,
    dims: CachedDims,
    scale: f32,
) {
    let CachedDims {
        b,
        h,
        kv_h,
        t,
        past,
        d,
    } = dims;
    assert!(
        kv_h > 0 && h.is_multiple_of(kv_h),
        "attention: {h} query heads over {kv_h} key/value heads"
    );
    let n = past + t;
    let qd = Dims { b, h, t, d };
    let kvd = Dims {
        b,
        h: kv_h,
        t: n,
        d,
    };
    assert!(
        q.x.len() >= q.layout.extent(qd)
            && k.x.len() >= k.layout.extent(kvd)
            && v.x.len() >= v.layout.extent(kvd),
        "attention: input too short"
    );
    if b * h * t == 0 {
        return;
    }
    let group = h / kv_h;
    let o = Out::new(o, qd);
    let per_head = t * n;
    scores[..b * h * per_head]
        .par_chunks_mut(per_head)
        .enumerate()
        .for_each(|(bh, p)| {
            let at = HeadAt {
                b: bh / h,
                h: bh % h,
                kv: bh % h / group,
            };
            if t == 1 {
                decode_head(&o, p, (&q, &k, &v), at, n, d, scale);
            } else {
                head_forward(&o, p, (&q, &k, &v), at, (t, past, d), scale, None);
            }
        });
}

/// One query (the last position, `n − 1`) of head `at` against keys `0..n`.
fn decode_head(
    o: &Out,
    p: &mut [f32],
    (q, k, v): (&Heads, &Heads, &Heads),
    at: HeadAt,
    n: usize,
    d: usize,
    scale: f32,
) {
    let qrow = &q.x[q.layout.at(at.b, at.h)..][..d];
    let (k0, v0) = (k.layout.at(at.b, at.kv), v.layout.at(at.b, at.kv));
    let s = &mut p[..n];
    attention_decode::scores(s, qrow, &k.x[k0..], k.layout.row, scale);
    let mx = simd::max(s);
    let sum = simd::exp_shifted_sum(s, mx);
    simd::scale(s, 1.0 / sum);
    // SAFETY: the caller's task owns head (at.b, at.h) of `o`, whose first row holds `d`
    // floats (the extent check of `Out::new`).
    let out = unsafe { std::slice::from_raw_parts_mut(o.head_ptr(at.b, at.h), d) };
    attention_decode::weighted_sum(out, s, &v.x[v0..], v.layout.row);
}
