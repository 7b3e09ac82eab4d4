//! The super-block types of llama.cpp (`QK_K` = 256 weights a block) and BF16: block layouts
//! and the reference dequantisation every SIMD body must reproduce bit for bit.
//!
//! Layouts (little-endian; `d`, `dmin` are f16; checked against ggml's `ggml-common.h` and
//! cross-checked with the `gguf` Python package's dequantisation in `tests/gguf_kquants.rs`):
//! - `Q4_K` (144 bytes): `d`, `dmin`, 12 bytes of packed 6-bit scales and mins (eight of
//!   each), 128 bytes of nibbles. Sub-block `j` (weights `32j..32j+32`) reads the low nibbles
//!   of bytes `32⌊j/2⌋..+32` when `j` is even, the high ones when odd; `x = (d·sc_j)·q − dmin·m_j`.
//! - `Q5_K` (176 bytes): as `Q4_K`, then 32 bytes `qh` before the nibbles; bit `j` of `qh[l]`
//!   is the fifth bit of weight `l` of sub-block `j`.
//! - `Q6_K` (210 bytes): 128 bytes low nibbles `ql`, 64 bytes of 2-bit pairs `qh`, 16 signed
//!   scales, `d` last; weight `i` has scale `sc[i/16]` and `x = (d·sc)·(q − 32)`.
//! - `BF16`: the high 16 bits of an f32.
//!
//! Each value is a product then a difference in f32, never fused, so SIMD bodies that do the
//! same operations in the same order give identical bits.

use super::le::f16_at;

/// Weights in one super-block.
pub const QK_K: usize = 256;
/// Bytes of a `Q4_K` super-block.
pub const Q4_K_BYTES: usize = 144;
/// Bytes of a `Q5_K` super-block.
pub const Q5_K_BYTES: usize = 176;
/// Bytes of a `Q6_K` super-block.
pub const Q6_K_BYTES: usize = 210;

/// Scale and minimum (6 bits each) of sub-block `j` (0..8) from the 12 packed bytes `s`:
/// sub-blocks 0..4 keep theirs in the low six bits of bytes `j` and `j + 4`; 4..8 split
/// theirs between a nibble of byte `j + 4` and the top two bits of bytes `j − 4` and `j`.
#[inline]
pub fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// The eight scales then the eight minimums of [`scale_min_k4`] at once, unpacked from the
/// 12 bytes `s` with whole-word masks (llama.cpp's `kmask` trick), for the integer kernels
/// that need all sixteen per block.
#[inline]
pub fn scale_min_k4_all(s: &[u8]) -> [u8; 16] {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let w = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (a, b, c) = (w(0), w(1), w(2));
    let words = [
        a & LOW6,
        (c & LOW4) | (((a >> 6) & LOW2) << 4),
        b & LOW6,
        ((c >> 4) & LOW4) | (((b >> 6) & LOW2) << 4),
    ];
    let mut out = [0u8; 16];
    for (o, v) in out.chunks_exact_mut(4).zip(words) {
        o.copy_from_slice(&v.to_le_bytes());
    }
    out
}

/// `(d·sc_j, dmin·m_j)` for every sub-block of a `Q4_K`/`Q5_K` block `b`.
#[inline]
pub fn k4_scales(b: &[u8]) -> [(f32, f32); 8] {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    std::array::from_fn(|j| {
        let (sc, m) = scale_min_k4(j, &b[4..16]);
        (d * f32::from(sc), dmin * f32::from(m))
    })
}

/// Dequantises `Q4_K` super-blocks.
pub fn dequantize_q4_k(raw: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(QK_K).zip(raw.chunks_exact(Q4_K_BYTES)) {
        let sm = k4_scales(b);
        let qs = &b[16..];
        for (j, (sub, &(d, m))) in o.chunks_exact_mut(32).zip(&sm).enumerate() {
            let (q, shift) = (&qs[32 * (j / 2)..32 * (j / 2) + 32], 4 * (j % 2));
            for (x, &v) in sub.iter_mut().zip(q) {
                *x = d * f32::from((v >> shift) & 0x0F) - m;
            }
        }
    }
}

/// Dequantises `Q5_K` super-blocks.
pub fn dequantize_q5_k(raw: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(QK_K).zip(raw.chunks_exact(Q5_K_BYTES)) {
        let sm = k4_scales(b);
        let (qh, qs) = (&b[16..48], &b[48..]);
        for (j, (sub, &(d, m))) in o.chunks_exact_mut(32).zip(&sm).enumerate() {
            let (q, shift) = (&qs[32 * (j / 2)..32 * (j / 2) + 32], 4 * (j % 2));
            for ((x, &v), &h) in sub.iter_mut().zip(q).zip(qh) {
                let q5 = ((v >> shift) & 0x0F) | (((h >> j) & 1) << 4);
                *x = d * f32::from(q5) - m;
            }
        }
    }
}

/// Dequantises `Q6_K` super-blocks.
pub fn dequantize_q6_k(raw: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(QK_K).zip(raw.chunks_exact(Q6_K_BYTES)) {
        let (ql, qh, sc) = (&b[..128], &b[128..192], &b[192..208]);
        let d = f16_at(b, 208);
        for (i, x) in o.iter_mut().enumerate() {
            *x = d * f32::from(sc[i / 16] as i8) * f32::from(q6(ql, qh, i) - 32);
        }
    }
}

/// The 6-bit quant of weight `i` of a `Q6_K` block: in each half of 128 weights, the four
/// runs of 32 take the low nibbles of `ql[0..32]`, of `ql[32..64]`, then the high nibbles of
/// the same, with bit pairs 0-1, 2-3, 4-5, 6-7 of `qh[0..32]` on top.
#[inline]
pub(crate) fn q6(ql: &[u8], qh: &[u8], i: usize) -> i8 {
    let (half, run, l) = (i / 128, (i % 128) / 32, i % 32);
    let lo = (ql[64 * half + l + 32 * (run % 2)] >> (4 * (run / 2))) & 0x0F;
    let hi = (qh[32 * half + l] >> (2 * run)) & 3;
    (lo | (hi << 4)) as i8
}

/// Converts BF16 values.
pub fn dequantize_bf16(raw: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(raw.chunks_exact(2)) {
        *o = f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-mask unpacking gives every scale and minimum of the byte-by-byte rule, for
    /// every value of each of the 12 bytes (the others random).
    #[test]
    fn all_scales_at_once_equal_one_by_one() {
        let mut r = crate::init::rng::seeded(11);
        for byte in 0..12 {
            for v in 0..=255u8 {
                let mut s: [u8; 12] = std::array::from_fn(|_| rand::Rng::random(&mut r));
                s[byte] = v;
                let all = scale_min_k4_all(&s);
                for j in 0..8 {
                    assert_eq!((all[j], all[8 + j]), scale_min_k4(j, &s), "{s:?} j {j}");
                }
            }
        }
    }
}
