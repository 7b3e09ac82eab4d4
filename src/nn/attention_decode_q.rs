//! One decode step's attention over keys and values stored as group-quantised codes (a KV
//! cache of 8 or 4 bits, [`super::group_quant`]): each cached row holds `K·D` codes (4-bit
//! codes two to a byte) and one `(scale, zero)` per group of `g` values, a group never
//! crossing a head.
//!
//! Scores dequantise each key row of a head into a small buffer, `k̂ = s·(u − z)` exactly as
//! the quantiser wrote it back for prefill, and take the dot product with the query; the
//! output adds `(p_j·s)·(u − z)` for every value row, read once, as codes. Query, scores,
//! softmax and output stay f32.

use rayon::prelude::*;

use super::attention::{Dims, HeadAt, Heads, HeadsMut, Out};
use super::attention_cached::CachedDims;
use super::simd;

/// The largest head a quantised cache serves (the per-head buffers live on the stack).
pub const MAX_HEAD_DIM: usize = 512;

/// Cached rows of codes: row `j` (one position, all `K` heads) starts at byte `j·row_bytes`
/// of `codes` and at parameter `j·row_groups` of `params`.
#[derive(Clone, Copy, Debug)]
pub struct QuantRows<'a> {
    /// Codes, `bits` each (4-bit: two per byte, low nibble first).
    pub codes: &'a [u8],
    /// `(scale, zero)` per group.
    pub params: &'a [[f32; 2]],
    /// Bits per code (4 or 8).
    pub bits: u32,
    /// Values per group (divides `D`).
    pub group: usize,
    /// Bytes per row.
    pub row_bytes: usize,
    /// Groups per row.
    pub row_groups: usize,
}

impl QuantRows<'_> {
    /// Code `i` of row `j`'s head starting at value `h0`.
    #[inline]
    fn code(&self, j: usize, h0: usize, i: usize) -> u8 {
        let e = h0 + i;
        let base = j * self.row_bytes;
        if self.bits == 4 {
            (self.codes[base + e / 2] >> (4 * (e % 2))) & 0xF
        } else {
            self.codes[base + e]
        }
    }

    /// `(scale, zero)` of the group holding value `h0 + i` of row `j`.
    #[inline]
    fn param(&self, j: usize, h0: usize, i: usize) -> [f32; 2] {
        self.params[j * self.row_groups + (h0 + i) / self.group]
    }

    /// Row `j`'s head starting at value `h0`, decoded into `out` (`D` values).
    fn decode_head(&self, j: usize, h0: usize, out: &mut [f32]) {
        for (i, o) in out.iter_mut().enumerate() {
            let [s, z] = self.param(j, h0, i);
            *o = s * (f32::from(self.code(j, h0, i)) - z);
        }
    }
}

/// `O = softmax(q·Kᵀ·scale)·V` for one new query per head (`dims.t == 1`, one sequence) over
/// the `past + 1` quantised rows of `k` and `v`. `scores` holds at least `H·(past + 1)` floats.
/// Heads run in parallel; results do not depend on the thread count.
pub fn decode(
    o: HeadsMut,
    scores: &mut [f32],
    q: Heads,
    (k, v): (QuantRows, QuantRows),
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
        t == 1 && b == 1,
        "quantised decode attention takes one query per head"
    );
    assert!(
        kv_h > 0 && h.is_multiple_of(kv_h) && d <= MAX_HEAD_DIM,
        "attention: {h} query heads over {kv_h} key/value heads of {d}"
    );
    let n = past + 1;
    for r in [&k, &v] {
        assert!(
            d.is_multiple_of(r.group)
                && r.row_groups * r.group == kv_h * d
                && r.codes.len() >= n * r.row_bytes
                && r.params.len() >= n * r.row_groups,
            "attention: quantised rows too short"
        );
    }
    assert!(q.x.len() >= q.layout.extent(Dims { b, h, t, d }));
    if h == 0 {
        return;
    }
    let per = h / kv_h;
    let o = Out::new(o, Dims { b, h, t, d });
    scores[..h * n]
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(hh, s)| {
            let at = HeadAt {
                b: 0,
                h: hh,
                kv: hh / per,
            };
            let qrow = &q.x[q.layout.at(0, at.h)..][..d];
            let h0 = at.kv * d;
            let mut buf = [0.0f32; MAX_HEAD_DIM];
            let row = &mut buf[..d];
            for (j, sj) in s.iter_mut().enumerate() {
                k.decode_head(j, h0, row);
                *sj = simd::dot(qrow, row) * scale;
            }
            let mx = simd::max(s);
            let sum = simd::exp_shifted_sum(s, mx);
            simd::scale(s, 1.0 / sum);
            // SAFETY: this task owns head (0, at.h) of `o`, whose first row holds `d` floats
            // (the extent check of `Out::new`).
            let out = unsafe { std::slice::from_raw_parts_mut(o.head_ptr(0, at.h), d) };
            weighted_sum(out, s, &v, h0);
        });
}

/// `out = Σ_j p_j·v̂_j` over the head starting at value `h0` of each value row.
fn weighted_sum(out: &mut [f32], p: &[f32], v: &QuantRows, h0: usize) {
    let g = v.group;
    out.fill(0.0);
    for (j, &pj) in p.iter().enumerate() {
        for (c, og) in out.chunks_exact_mut(g).enumerate() {
            let [s, z] = v.param(j, h0, c * g);
            let w = pj * s;
            for (i, o) in og.iter_mut().enumerate() {
                *o += w * (f32::from(v.code(j, h0, c * g + i)) - z);
            }
        }
    }
}
