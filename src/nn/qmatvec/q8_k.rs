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

use super::q8_vector::{BLOCK, Q8Row};
use crate::io::gguf::GgmlType;
use crate::io::gguf::kquants::{q6, scale_min_k4_all};
use crate::io::gguf::le::f16_at;

/// `Σ` over one row's super-blocks of `ty` (one of Q4_K, Q5_K, Q6_K).
pub(super) fn dot_row(ty: GgmlType, row: &[u8], x: Q8Row<'_>) -> f32 {
    let (_, bytes) = ty.block();
    let mut sum = 0.0f32;
    for (sb, blk) in row.chunks_exact(bytes).enumerate() {
        // Sub-block j of this super-block meets block 8·sb + j of `x`.
        let block = |j: usize| &x.q[(8 * sb + j) * BLOCK..(8 * sb + j + 1) * BLOCK];
        if ty == GgmlType::Q6_K {
            let d = f16_at(blk, 208);
            let (ql, qh, sc) = (&blk[..128], &blk[128..192], &blk[192..208]);
            for j in 0..8 {
                let q = block(j);
                // Two 16-weight halves, each with its signed scale.
                let scaled: i32 = (0..2)
                    .map(|h| {
                        let part: i32 = (16 * h..16 * h + 16)
                            .map(|l| (i32::from(q6(ql, qh, 32 * j + l)) - 32) * i32::from(q[l]))
                            .sum();
                        i32::from(sc[2 * j + h] as i8) * part
                    })
                    .sum();
                sum += d * x.d[8 * sb + j] * scaled as f32;
            }
            continue;
        }
        let (d, dmin) = (f16_at(blk, 0), f16_at(blk, 2));
        let sm = scale_min_k4_all(&blk[4..16]);
        let (qh, qs) = match ty {
            GgmlType::Q5_K => (Some(&blk[16..48]), &blk[48..]),
            _ => (None, &blk[16..]),
        };
        for j in 0..8 {
            let q = block(j);
            let nib = &qs[32 * (j / 2)..32 * (j / 2) + 32];
            let dot: i32 = (0..BLOCK)
                .map(|l| {
                    let fifth = qh.map_or(0, |h| ((h[l] >> j) & 1) << 4);
                    i32::from(((nib[l] >> (4 * (j % 2))) & 15) | fifth) * i32::from(q[l])
                })
                .sum();
            let (sc, m) = (f32::from(sm[j]), f32::from(sm[8 + j]));
            sum += (d * sc) * x.d[8 * sb + j] * dot as f32 - (dmin * m) * x.s[8 * sb + j];
        }
    }
    sum
}
