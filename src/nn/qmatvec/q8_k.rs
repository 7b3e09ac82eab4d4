//! Integer dot products of the super-block types (Q4_K, Q5_K, Q6_K) with a [`Q8Vector`]: the
//! portable body, the reference of the x86 ones (`x86_q8_k.rs`).
//!
//! llama.cpp rounds the activations to one scale per 256 (its Q8_K) for these types; here the
//! 32-wide blocks of [`Q8Vector`] serve every type: each 32-weight sub-block of a super-block
//! meets exactly one block of `x` (block `8·B + j` for sub-block `j` of super-block `B`), so
//! one rounding of the activations serves every matrix of a layer, whatever its type, with
//! a finer scale than Q8_K's. Per sub-block `j` (`d·Σq` of the block of `x` is `s_x`):
//! - Q4_K, Q5_K: `(d·sc_j)·d_x·Σ n·q − (dmin·m_j)·s_x` (`n` the 4- or 5-bit unsigned quant);
//! - Q6_K: `d·d_x·Σ_h sc_{2j+h}·Σ_{16 weights} (n − 32)·q` (two 16-weight halves, each with
//!   its signed 8-bit scale; `n` the 6-bit quant).
//!
//! The integer sums are exact; the bodies differ in the order of the float sums only.

use super::q8::{BLOCK, Q8Row};
use crate::io::gguf::GgmlType;
use crate::io::gguf::dtype::f16_at;
use crate::io::gguf::kquants::scale_min_k4_all;

/// `Σ` over one row's super-blocks of `ty` (one of Q4_K, Q5_K, Q6_K).
pub(super) fn dot_row(ty: GgmlType, row: &[u8], x: Q8Row<'_>) -> f32 {
    let (_, bytes) = ty.block();
    let mut sum = 0.0f32;
    for (sb, blk) in row.chunks_exact(bytes).enumerate() {
        for j in 0..8 {
            let k = 8 * sb + j;
            let q = &x.q[k * BLOCK..(k + 1) * BLOCK];
            let dot = |w: &dyn Fn(usize) -> i32| -> i32 {
                (0..BLOCK).map(|l| w(l) * i32::from(q[l])).sum()
            };
            sum += match ty {
                GgmlType::Q6_K => {
                    let d = f16_at(blk, 208);
                    let (ql, qh, sc) = (&blk[..128], &blk[128..192], &blk[192..208]);
                    // Sub-block j: half j / 4 of the block, run j % 4 of that half.
                    let (half, run) = (j / 4, j % 4);
                    let n = |l: usize| {
                        let lo = (ql[64 * half + 32 * (run % 2) + l] >> (4 * (run / 2))) & 15;
                        let hi = (qh[32 * half + l] >> (2 * run)) & 3;
                        i32::from(lo | (hi << 4)) - 32
                    };
                    let scaled: i32 = (0..2)
                        .map(|h| {
                            let part: i32 =
                                (16 * h..16 * h + 16).map(|l| n(l) * i32::from(q[l])).sum();
                            i32::from(sc[2 * j + h] as i8) * part
                        })
                        .sum();
                    d * x.d[k] * scaled as f32
                }
                _ => {
                    let (d, dmin) = (f16_at(blk, 0), f16_at(blk, 2));
                    let sm = scale_min_k4_all(&blk[4..16]);
                    let (qh, qs) = match ty {
                        GgmlType::Q5_K => (Some(&blk[16..48]), &blk[48..]),
                        _ => (None, &blk[16..]),
                    };
                    let nib = &qs[32 * (j / 2)..32 * (j / 2) + 32];
                    let n = |l: usize| {
                        let fifth = qh.map_or(0, |h| ((h[l] >> j) & 1) << 4);
                        i32::from(((nib[l] >> (4 * (j % 2))) & 15) | fifth)
                    };
                    let (sc, m) = (f32::from(sm[j]), f32::from(sm[8 + j]));
                    (d * sc) * x.d[k] * dot(&n) as f32 - (dmin * m) * x.s[k]
                }
            };
        }
    }
    sum
}
