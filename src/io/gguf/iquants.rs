//! llama.cpp's non-linear 4-bit types `IQ4_NL` and `IQ4_XS`: block layouts and the reference
//! dequantisation every SIMD body must reproduce bit for bit.
//!
//! Both map each nibble through the same 16-entry table of signed levels, [`KVALUES_IQ4NL`]
//! (`kvalues_iq4nl` in ggml), instead of a uniform grid. Layouts (little-endian; `d` is f16;
//! checked against ggml's `ggml-common.h` and `dequantize_row_iq4_*` in `ggml-quants.c`, and
//! cross-checked with the `gguf` Python package's dequantisation in
//! `tests/integration/gguf_iquants.rs`):
//! - `IQ4_NL` (32 weights, 18 bytes): `d`, then 16 bytes `qs`; weight `j < 16` is
//!   `d·k[qs[j] & 15]`, weight `j + 16` is `d·k[qs[j] >> 4]` (the nibble order of `Q4_0`).
//! - `IQ4_XS` (256 weights, 136 bytes): `d`, a u16 `scales_h`, 4 bytes `scales_l`, 128 bytes
//!   `qs`. Sub-block `i` (weights `32i..32i+32`) has the 6-bit scale
//!   `ls = nibble i of scales_l (low nibble first) | bits 2i..2i+2 of scales_h << 4`, the f32
//!   scale `dl = d·(ls − 32)`, and its weights are `dl·k[n]` for the nibbles of
//!   `qs[16i..16i+16]` in `IQ4_NL`'s order.
//!
//! Each value is one f32 product (`IQ4_XS`: of the f32 `dl` computed first), as in ggml and
//! the `gguf` package, so SIMD bodies that do the same give identical bits.

use super::le::f16_at;

/// The 16 levels of a nibble (`kvalues_iq4nl`).
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Bytes of an `IQ4_NL` block (32 weights).
pub const IQ4_NL_BYTES: usize = 18;
/// Bytes of an `IQ4_XS` super-block (256 weights).
pub const IQ4_XS_BYTES: usize = 136;

/// `dl = d·(ls − 32)` of the eight sub-blocks of the `IQ4_XS` block `b`.
#[inline]
pub fn iq4_xs_scales(b: &[u8]) -> [f32; 8] {
    let d = f16_at(b, 0);
    let sh = u16::from_le_bytes([b[2], b[3]]);
    std::array::from_fn(|i| {
        let lo = (b[4 + i / 2] >> (4 * (i % 2))) & 0x0F;
        let hi = ((sh >> (2 * i)) & 3) as u8;
        d * f32::from(i16::from(lo | (hi << 4)) - 32)
    })
}

/// The 32 weights `d·k[n]` of the nibbles `qs` (16 bytes: low nibbles first, then high).
#[inline]
fn nibble_levels(d: f32, qs: &[u8], out: &mut [f32]) {
    for (j, &q) in qs.iter().enumerate() {
        out[j] = d * f32::from(KVALUES_IQ4NL[usize::from(q & 0x0F)]);
        out[j + 16] = d * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
    }
}

/// Dequantises `IQ4_NL` blocks.
pub fn dequantize_iq4_nl(raw: &[u8], out: &mut [f32]) {
    for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(IQ4_NL_BYTES)) {
        nibble_levels(f16_at(b, 0), &b[2..18], o);
    }
}

/// Dequantises `IQ4_XS` super-blocks.
pub fn dequantize_iq4_xs(raw: &[u8], out: &mut [f32]) {
    for (o, b) in out
        .chunks_exact_mut(256)
        .zip(raw.chunks_exact(IQ4_XS_BYTES))
    {
        let dl = iq4_xs_scales(b);
        for (i, sub) in o.chunks_exact_mut(32).enumerate() {
            nibble_levels(dl[i], &b[8 + 16 * i..24 + 16 * i], sub);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iq4_xs_scale_bits_and_nibble_order() {
        let mut b = [0u8; IQ4_XS_BYTES];
        b[..2].copy_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
        // Sub-block 0: ls = 0x3 | (0b10 << 4) = 35; sub-block 1: ls = 0xA | (0b01 << 4) = 26;
        // sub-block 7: ls = 0x0 | (0b11 << 4) = 48.
        b[2..4].copy_from_slice(&(0b10u16 | (0b01 << 2) | (0b11 << 14)).to_le_bytes());
        b[4] = 0xA3;
        let dl = iq4_xs_scales(&b);
        assert_eq!((dl[0], dl[1], dl[7]), (1.5, -3.0, 8.0));
        b[8] = 0xF0; // weight 0: level 0 (−127), weight 16: level 15 (113)
        let mut out = [0.0f32; 256];
        dequantize_iq4_xs(&b, &mut out);
        assert_eq!(
            (out[0], out[16], out[1]),
            (1.5 * -127.0, 1.5 * 113.0, 1.5 * -127.0)
        );
    }
}
