//! A KV cache of 8- or 4-bit codes, as QuaRot quantises it: every new key and value row is
//! split per token into groups of `g` values inside each head (one group per head unless
//! smaller groups are asked for) and each group rounded to nearest on its own asymmetric
//! min/max grid, a scale and an integer zero point ([`GroupQuant`]).
//!
//! Like the f16 cache, the linear layers write new rows in f32 into staging rows;
//! `QuantStore::commit` encodes them into the cache and writes the decoded values back, so
//! every attention reads the same rounded keys and values: a decode step reads the codes
//! directly ([`attention_decode_q`]), a prefill chunk decodes the earlier rows into staging and
//! runs the f32 block kernel.

use std::ops::Range;

use crate::nn::attention::{HeadLayout, Heads, HeadsMut};
use crate::nn::attention_cached::{self, CachedDims};
use crate::nn::attention_decode_q::{self, QuantRows};
use crate::nn::group_quant::GroupQuant;

/// Quantised keys and values of every layer (`cap` rows of `K·D` values each), and one
/// layer's f32 staging rows.
#[derive(Debug, Clone)]
pub(crate) struct QuantStore {
    quant: GroupQuant,
    /// Values per row (`K·D`).
    width: usize,
    row_bytes: usize,
    row_groups: usize,
    k: Vec<Vec<u8>>,
    v: Vec<Vec<u8>>,
    kp: Vec<Vec<[f32; 2]>>,
    vp: Vec<Vec<[f32; 2]>>,
    sk: Vec<f32>,
    sv: Vec<f32>,
}

impl QuantStore {
    /// Zeroed storage for `layers` layers of `rows` rows of `width` values, groups of `group`
    /// values (which divide `width`, and are even at 4 bits).
    pub(super) fn new(bits: u32, group: usize, layers: usize, rows: usize, width: usize) -> Self {
        let quant = GroupQuant {
            bits,
            group,
            symmetric: false,
            clip: 1.0,
        };
        let (row_bytes, row_groups) = (quant.code_bytes(width), width / group);
        QuantStore {
            quant,
            width,
            row_bytes,
            row_groups,
            k: vec![vec![0; rows * row_bytes]; layers],
            v: vec![vec![0; rows * row_bytes]; layers],
            kp: vec![vec![[0.0; 2]; rows * row_groups]; layers],
            vp: vec![vec![[0.0; 2]; rows * row_groups]; layers],
            sk: vec![0.0; rows * width],
            sv: vec![0.0; rows * width],
        }
    }

    /// Bits per code.
    pub(super) fn bits(&self) -> u32 {
        self.quant.bits
    }

    /// Values per group.
    pub(super) fn group(&self) -> usize {
        self.quant.group
    }

    /// Bytes held (staging included).
    pub(super) fn bytes(&self) -> usize {
        let codes: usize = self.k.iter().chain(&self.v).map(Vec::len).sum();
        let params: usize = self.kp.iter().chain(&self.vp).map(Vec::len).sum();
        codes + 8 * params + 4 * (self.sk.len() + self.sv.len())
    }

    /// Staging rows `at` (elements) for new keys and values.
    pub(super) fn new_rows(&mut self, at: Range<usize>) -> (&mut [f32], &mut [f32]) {
        (&mut self.sk[at.clone()], &mut self.sv[at])
    }

    /// Encodes staging rows `at` (whole rows) into layer `l`, and writes the decoded values
    /// back to staging.
    pub(super) fn commit(&mut self, l: usize, at: Range<usize>) {
        let (w, rb, rg) = (self.width, self.row_bytes, self.row_groups);
        let rows = at.start / w..at.end / w;
        for (stage, codes, params) in [
            (&mut self.sk, &mut self.k[l], &mut self.kp[l]),
            (&mut self.sv, &mut self.v[l], &mut self.vp[l]),
        ] {
            for r in rows.clone() {
                self.quant.encode(
                    &mut stage[r * w..(r + 1) * w],
                    &mut codes[r * rb..(r + 1) * rb],
                    &mut params[r * rg..(r + 1) * rg],
                );
            }
        }
    }

    /// Causal attention over layer `l`'s rows (see `KvStore::attend`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend(
        &mut self,
        l: usize,
        p0: usize,
        o: HeadsMut,
        scores: &mut [f32],
        q: Heads,
        kv: HeadLayout,
        dims: CachedDims,
        scale: f32,
    ) {
        if dims.t == 1 && dims.b == 1 {
            let rows = |l: usize, k: bool| QuantRows {
                codes: if k { &self.k[l] } else { &self.v[l] },
                params: if k { &self.kp[l] } else { &self.vp[l] },
                bits: self.quant.bits,
                group: self.quant.group,
                row_bytes: self.row_bytes,
                row_groups: self.row_groups,
            };
            let (k, v) = (rows(l, true), rows(l, false));
            attention_decode_q::decode(o, scores, q, (k, v), dims, scale);
            return;
        }
        // Rows before p0 come from the codes; rows p0.. are already in staging.
        let w = self.width;
        let (rb, rg) = (self.row_bytes, self.row_groups);
        for (stage, codes, params) in [
            (&mut self.sk, &self.k[l], &self.kp[l]),
            (&mut self.sv, &self.v[l], &self.vp[l]),
        ] {
            for r in 0..p0 {
                self.quant.decode(
                    &codes[r * rb..(r + 1) * rb],
                    &params[r * rg..(r + 1) * rg],
                    &mut stage[r * w..(r + 1) * w],
                );
            }
        }
        let (k, v) = (
            Heads {
                x: &self.sk,
                layout: kv,
            },
            Heads {
                x: &self.sv,
                layout: kv,
            },
        );
        attention_cached::forward(o, scores, q, k, v, dims, scale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::attention_decode;

    fn draw(n: usize, seed: u64) -> Vec<f32> {
        let mut r = crate::init::rng::seeded(seed);
        (0..n)
            .map(|i| {
                let x: f32 = rand::Rng::random_range(&mut r, -1.0..1.0);
                // A few outliers, as keys have.
                if i % 37 == 5 { 8.0 * x } else { x }
            })
            .collect()
    }

    /// Every stored value decodes to within half a step of what was written (the grid's
    /// bound), the staging rows hold the decoded values, and the decode kernel's attention
    /// equals the f32 kernels' on those values.
    #[test]
    fn cache_rows_round_trip_within_the_grid_and_attention_reads_them() {
        let (rows, heads, d) = (9, 2, 16);
        let width = heads * d;
        for (bits, group) in [(8, 16), (4, 16), (4, 4), (8, 2)] {
            let mut s = QuantStore::new(bits, group, 2, rows, width);
            let (k0, v0) = (draw(rows * width, 1), draw(rows * width, 2));
            let (k, v) = s.new_rows(0..rows * width);
            k.copy_from_slice(&k0);
            v.copy_from_slice(&v0);
            s.commit(1, 0..rows * width);
            let qmax = ((1u32 << bits) - 1) as f32;
            for (orig, stage) in [(&k0, &s.sk), (&v0, &s.sv)] {
                for (og, sg) in orig.chunks(group).zip(stage.chunks(group)) {
                    let lo = og.iter().fold(0.0f32, |a, &x| a.min(x));
                    let hi = og.iter().fold(0.0f32, |a, &x| a.max(x));
                    let step = (hi - lo) / qmax;
                    for (a, b) in og.iter().zip(sg) {
                        assert!(
                            (a - b).abs() <= step / 2.0 * 1.0001 + 1e-7,
                            "{bits}/{group}"
                        );
                    }
                }
            }
            let mut back = vec![0.0; width];
            for r in 0..rows {
                s.quant.decode(
                    &s.k[1][r * s.row_bytes..(r + 1) * s.row_bytes],
                    &s.kp[1][r * s.row_groups..(r + 1) * s.row_groups],
                    &mut back,
                );
                assert_eq!(&back[..], &s.sk[r * width..(r + 1) * width]);
            }
            // One query per head over the 9 rows, by the codes and by the f32 kernels.
            let q = draw(width, 3);
            let (mut o, mut sc) = (vec![0.0; width], vec![0.0; heads * rows]);
            let lay = HeadLayout::rows(1, width, d);
            let kv = HeadLayout::rows(rows, width, d);
            let dims = CachedDims {
                b: 1,
                h: heads,
                kv_h: heads,
                t: 1,
                past: rows - 1,
                d,
            };
            s.attend(
                1,
                rows - 1,
                HeadsMut {
                    x: &mut o,
                    layout: lay,
                },
                &mut sc,
                Heads { x: &q, layout: lay },
                kv,
                dims,
                0.25,
            );
            for h in 0..heads {
                let mut p = vec![0.0; rows];
                attention_decode::scores(
                    &mut p,
                    &q[h * d..(h + 1) * d],
                    &s.sk[h * d..],
                    width,
                    0.25,
                );
                let m = p.iter().fold(f32::MIN, |a, &x| a.max(x));
                let z: f32 = p.iter().map(|x| (x - m).exp()).sum();
                p.iter_mut().for_each(|x| *x = (*x - m).exp() / z);
                let mut want = vec![0.0; d];
                attention_decode::weighted_sum(&mut want, &p, &s.sv[h * d..], width);
                for (a, b) in o[h * d..(h + 1) * d].iter().zip(&want) {
                    assert!((a - b).abs() < 1e-5, "{bits}/{group} head {h}: {a} vs {b}");
                }
            }
        }
    }
}
