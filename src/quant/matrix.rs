//! A weight matrix after quantisation: its codes, the grid of every span, and the grid values
//! (the f32 weights the model runs on), plus the GGUF block bytes of the formats that have
//! them.

use super::grid::{Format, Params};

/// A quantised `rows x cols` weight (`out x in`).
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    /// The grid it is on.
    pub format: Format,
    /// Output channels.
    pub rows: usize,
    /// Inputs.
    pub cols: usize,
    /// One code per weight, row-major.
    pub codes: Vec<u8>,
    /// The grid of each span, row by row (`rows · cols/span` of them).
    pub params: Vec<Params>,
}

impl QuantMatrix {
    /// The grid values, row-major: what the quantised model computes with.
    pub fn values(&self) -> Vec<f32> {
        let span = self.format.span(self.cols);
        let mut out = Vec::with_capacity(self.codes.len());
        for (codes, p) in self.codes.chunks_exact(span).zip(&self.params) {
            out.extend(codes.iter().enumerate().map(|(j, &q)| p.value(j, q)));
        }
        out
    }

    /// The matrix in its GGUF block format, row-major blocks (`None` for `Affine`).
    pub fn gguf_bytes(&self) -> Option<Vec<u8>> {
        let span = self.format.span(self.cols);
        let mut out = Vec::new();
        for (q, p) in self.codes.chunks_exact(span).zip(&self.params) {
            out.extend_from_slice(&p.head);
            match self.format {
                Format::Affine { .. } => return None,
                Format::Q8_0 => out.extend(q.iter().map(|&c| (i32::from(c) - 127) as i8 as u8)),
                Format::Q4_0 | Format::Q4_1 => {
                    out.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
                }
                // Bit `j` of the little-endian `qh` is the fifth bit of weight `j`.
                Format::Q5_0 | Format::Q5_1 => {
                    let qh = q
                        .iter()
                        .enumerate()
                        .fold(0u32, |h, (j, &c)| h | (u32::from(c >> 4) << j));
                    out.extend_from_slice(&qh.to_le_bytes());
                    out.extend((0..16).map(|j| (q[j] & 0xF) | ((q[j + 16] & 0xF) << 4)));
                }
                Format::Q4K => out.extend(k_nibbles(q)),
                // Each 32 weights: 16 bytes, the first 16 in the low nibbles.
                Format::Iq4Nl | Format::Iq4Xs => out.extend(
                    q.chunks_exact(32)
                        .flat_map(|c| (0..16).map(move |j| c[j] | (c[j + 16] << 4))),
                ),
                // `qh[l]` bit `j`: the fifth bit of weight `l` of sub-block `j`.
                Format::Q5K => {
                    out.extend(
                        (0..32).map(|l| (0..8).fold(0u8, |h, j| h | ((q[32 * j + l] >> 4) << j))),
                    );
                    out.extend(k_nibbles(q));
                }
                Format::Q6K => {
                    let at = out.len() - p.head.len();
                    let head = out.split_off(at);
                    out.extend(q6k_codes(q));
                    out.extend(head);
                }
            }
        }
        Some(out)
    }
}

/// Each 64 weights of a `Q4_K`/`Q5_K` super-block: 32 bytes, sub-block `2k` in the low
/// nibbles and `2k+1` in the high ones.
fn k_nibbles(q: &[u8]) -> impl Iterator<Item = u8> + '_ {
    q.chunks_exact(64)
        .flat_map(|c| (0..32).map(move |l| (c[l] & 0xF) | ((c[l + 32] & 0xF) << 4)))
}

/// A `Q6_K` super-block's 128 bytes of low nibbles then 64 of bit pairs (its scales and `d`
/// follow): in each half of 128 weights, runs 0 and 2 share the bytes `ql[0..32]` (low and
/// high nibble), runs 1 and 3 `ql[32..64]`, and `qh[l]` holds the top two bits of weight `l`
/// of runs 0-3 in bit pairs 0-1, 2-3, 4-5, 6-7.
fn q6k_codes(q: &[u8]) -> Vec<u8> {
    let (mut ql, mut qh) = (Vec::with_capacity(128), Vec::with_capacity(64));
    for h in q.chunks_exact(128) {
        ql.extend((0..32).map(|l| (h[l] & 0xF) | ((h[l + 64] & 0xF) << 4)));
        ql.extend((0..32).map(|l| (h[l + 32] & 0xF) | ((h[l + 96] & 0xF) << 4)));
        qh.extend((0..32).map(|l| {
            (h[l] >> 4)
                | ((h[l + 32] >> 4) << 2)
                | ((h[l + 64] >> 4) << 4)
                | ((h[l + 96] >> 4) << 6)
        }));
    }
    ql.extend(qh);
    ql
}

#[cfg(test)]
mod tests {
    use super::super::rtn::{Clip, rtn};
    use super::*;
    use crate::io::gguf::GgmlType;
    use crate::io::gguf::dtype::dequantize;

    /// Every block format's bytes, read back by the GGUF reader's dequantiser (llama.cpp's
    /// layouts, checked against gguf-py in tests/integration/gguf_kquants.rs), give exactly
    /// the grid values the quantised model computes with.
    #[test]
    fn every_format_reads_back_as_its_grid_values() {
        let (rows, cols) = (3, 512);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i as f32 * 0.618).sin() * 1.7).powi(3) + if i % 61 == 0 { 4.0 } else { 0.0 })
            .collect();
        let imp: Vec<f64> = (0..cols).map(|j| 1.0 + (j % 5) as f64).collect();
        for f in Format::BLOCK_FORMATS {
            for (clip, h) in [
                (Clip::None, None),
                (Clip::Scales, None),
                (Clip::Scales, Some(&imp[..])),
            ] {
                let q = rtn(&w, rows, cols, f, clip, h);
                let bytes = q.gguf_bytes().unwrap();
                let ty = GgmlType::from_id(super::super::write::type_id(f).unwrap()).unwrap();
                assert_eq!(
                    bytes.len() as u64,
                    ty.byte_size((rows * cols) as u64).unwrap(),
                    "{f:?}"
                );
                let mut back = vec![0.0f32; rows * cols];
                dequantize(ty, &bytes, &mut back);
                assert_eq!(back, q.values(), "{f:?} {clip:?}");
                let err: f32 = back
                    .iter()
                    .zip(&w)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max);
                assert!(err < 0.7, "{f:?} {clip:?}: max error {err}");
            }
        }
    }
}
