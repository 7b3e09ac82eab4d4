//! Simulated symmetric round-to-nearest quantisation (the grids of [`GroupQuant`], one scale
//! per slice, row or group): the study's weight and activation rounding.
//!
//! Symmetric RTN with `b` bits on a group `x`: `s = max|x| / (2^(b−1) − 1)`,
//! `x̂ = s·clamp(round(x/s), −(2^(b−1)−1), 2^(b−1)−1)`.

use crate::nn::group_quant::GroupQuant;

fn symmetric(bits: u32, group: usize) -> GroupQuant {
    GroupQuant {
        bits,
        group,
        symmetric: true,
        clip: 1.0,
    }
}

/// Quantises `x` in place with one scale for the whole slice.
pub fn quantize_group(x: &mut [f32], bits: u32) {
    symmetric(bits, 0).fake_quant(x);
}

/// Quantises every row (`width` values, e.g. one token's activation) with its own scale.
pub fn quantize_rows(x: &mut [f32], width: usize, bits: u32) {
    symmetric(bits, 0).fake_quant_rows(x, width);
}

/// Quantises a weight (`rows x cols`) per output channel (`group = 0`) or per `group` inputs.
pub fn quantize_weight(w: &mut [f32], cols: usize, bits: u32, group: usize) {
    let g = if group == 0 || group > cols {
        cols
    } else {
        group
    };
    symmetric(bits, g).fake_quant_rows(w, cols);
}
