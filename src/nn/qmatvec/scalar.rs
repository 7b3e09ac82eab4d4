//! The portable body of the quantised matrix-vector product: each row is dequantised in
//! segments of [`SEGMENT`] weights into a stack buffer by [`dequantize`], then multiplied
//! with [`simd::dot`] (which the baseline build vectorises four lanes wide).

use super::dequantize;
use crate::io::gguf::GgmlType;
use crate::nn::simd;

/// Weights dequantised at a time (a multiple of every block size).
const SEGMENT: usize = 256;

/// `y[r] = Σ_c W[r, c]·x[c]` for every row of `data`.
pub(super) fn matvec(ty: GgmlType, data: &[u8], cols: usize, x: &[f32], y: &mut [f32]) {
    let (per, bytes) = ty.block();
    let rb = cols / per * bytes;
    let seg_bytes = SEGMENT / per * bytes;
    let mut buf = [0.0f32; SEGMENT];
    for (o, row) in y.iter_mut().zip(data.chunks_exact(rb)) {
        *o = row
            .chunks(seg_bytes)
            .zip(x.chunks(SEGMENT))
            .map(|(raw, xs)| {
                let w = &mut buf[..xs.len()];
                dequantize(ty, raw, w);
                simd::dot(w, xs)
            })
            .sum();
    }
}
