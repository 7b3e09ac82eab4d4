//! Integer dot products for decode: the activation vector rounded to 8 bits per block of 32
//! (llama.cpp's Q8_0/Q8_1 "vec_dot" types) and multiplied with Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1
//! weights in integers, one f32 scale per block.
//!
//! A block of `x` becomes `d·q` with `d = max|x|/127` and `q = round(x/d)` (ties away from
//! zero, as llama.cpp's `roundf`), and `s = d·Σq`. Per block of weights:
//! - Q8_0: `d_w·d·Σ q_w·q`;
//! - Q4_0: `d_w·d·Σ n_w·q − 8·d_w·s` (nibbles `n_w` in 0..16);
//! - Q4_1: `d_w·d·Σ n_w·q + m_w·s`;
//! - Q5_0: `d_w·d·Σ n_w·q − 16·d_w·s` (5-bit `n_w` in 0..32: the nibble and a bit of `qh`);
//! - Q5_1: `d_w·d·Σ n_w·q + m_w·s`;
//! - Q4_K, Q5_K, Q6_K: their 32-weight sub-blocks line up with the blocks of `x`, so the same
//!   terms with each sub-block's scale (`q8_k.rs`).
//!
//! The integer sums are exact, so the bodies (VNNI, AVX2, portable) differ only in the order
//! of the f32 block sums. Rounding `x` changes the result against the f32 product by about
//! 0.3% of `|W|·|x|` at most per block: it is an option of the engine
//! ([`MatvecInput`](super::MatvecInput)), never a silent default of the kernels.

use super::q8_vector::{BLOCK, Q8Row};
use crate::io::gguf::GgmlType;
use crate::io::gguf::blocks::{self as fmt, BlockFormat};
use crate::io::gguf::le::f16_at;

/// Whether `ty` has an integer dot product with a [`Q8Vector`](super::Q8Vector).
pub fn supports(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q8_0
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
    )
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// `Σ_b` of one row's block terms (the portable body; the reference of the x86 ones).
fn dot_row(ty: GgmlType, row: &[u8], x: Q8Row<'_>) -> f32 {
    if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
        return super::q8_k::dot_row(ty, row, x);
    }
    let (_, bytes) = ty.block();
    let mut sum = 0.0f32;
    for (b, blk) in row.chunks_exact(bytes).enumerate() {
        let q = &x.q[b * BLOCK..(b + 1) * BLOCK];
        let dw = f16_at(blk, 0);
        let term = match ty {
            GgmlType::Q8_0 => {
                let w = &blk[2..fmt::Q8_0::BYTES];
                let dot: i32 = w
                    .iter()
                    .zip(q)
                    .map(|(&w, &q)| i32::from(w as i8) * i32::from(q))
                    .sum();
                dw * x.d[b] * dot as f32
            }
            _ => {
                // (nibbles, the fifth bits `qh` (0 for 4-bit types), offset per unit of `s`)
                let (nib, qh, offset) = match ty {
                    GgmlType::Q4_0 => (&blk[2..fmt::Q4_0::BYTES], 0, -8.0 * dw),
                    GgmlType::Q4_1 => (&blk[4..fmt::Q4_1::BYTES], 0, f16_at(blk, 2)),
                    GgmlType::Q5_0 => (&blk[6..fmt::Q5_0::BYTES], u32_at(blk, 2), -16.0 * dw),
                    _ => (&blk[8..fmt::Q5_1::BYTES], u32_at(blk, 4), f16_at(blk, 2)),
                };
                let bit = |j: usize| ((qh >> j) & 1) as i32 * 16;
                let dot: i32 = (0..16)
                    .map(|j| {
                        let (lo, hi) = (
                            i32::from(nib[j] & 15) + bit(j),
                            i32::from(nib[j] >> 4) + bit(j + 16),
                        );
                        lo * i32::from(q[j]) + hi * i32::from(q[j + 16])
                    })
                    .sum();
                dw * x.d[b] * dot as f32 + offset * x.s[b]
            }
        };
        sum += term;
    }
    sum
}

/// `y[r] = Σ_c W[r, c]·x[c]` for every row of `data`, `ty` one of [`supports`].
pub(super) fn matvec(ty: GgmlType, data: &[u8], cols: usize, x: Q8Row<'_>, y: &mut [f32]) {
    let (per, bytes) = ty.block();
    let rb = cols / per * bytes;
    for (o, row) in y.iter_mut().zip(data.chunks_exact(rb)) {
        *o = dot_row(ty, row, x);
    }
}
