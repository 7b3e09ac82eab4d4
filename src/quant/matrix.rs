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
                // Each 64 weights: 32 bytes, sub-block 2k in the low nibbles, 2k+1 in the high.
                Format::Q4K => {
                    for c in q.chunks_exact(64) {
                        out.extend((0..32).map(|l| c[l] | (c[l + 32] << 4)));
                    }
                }
            }
        }
        Some(out)
    }
}
