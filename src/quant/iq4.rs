//! The grids of llama.cpp's non-linear 4-bit formats `IQ4_NL` (blocks of 32) and `IQ4_XS`
//! (super-blocks of 256): every weight is `dl·k[q]` for one of the 16 signed levels `k`
//! ([`KVALUES_IQ4NL`]) and a scale `dl` per 32 weights (`IQ4_NL`: the block's f16 `d`;
//! `IQ4_XS`: `d·(ls − 32)`, a 6-bit `ls` per sub-block against the super-block's f16 `d`).
//! Layouts and decoding are [`crate::io::gguf::iquants`]'.
//!
//! Scales are chosen as `quantize_row_iq4_nl_impl` in ggml-quants.c does (llama.cpp's only
//! rounding for these types, with or without an importance matrix): per 32 weights, the
//! weighted least-squares scale of the nearest levels at `max/127`, then 15 more candidate
//! scales `max/(k₀ + t)` for `t` in −7..=7, the one with the largest `(Σwxq)²/Σwq²` kept;
//! weights `qwᵢ·√(σ² + xᵢ²)` with an importance vector (`σ²` twice the span's mean square),
//! else `xᵢ²`. Codes are not kept here: [`Params::code`] rounds each weight to its nearest
//! level on the stored (f16) scale.

use super::grid::{Format, Params, h};
use crate::io::gguf::iquants::KVALUES_IQ4NL;

/// Below this a block is all zeros (llama.cpp's `GROUP_MAX_EPS`).
const EPS: f32 = 1e-15;
/// Candidate scales on each side of the first (llama.cpp's `ntry`).
const NTRY: i32 = 7;

/// The index of the level nearest to `x` (in units of the scale), ties upward
/// (`best_index_int8`).
fn nearest_level(x: f32) -> usize {
    let k = &KVALUES_IQ4NL;
    if x <= f32::from(k[0]) {
        return 0;
    }
    if x >= f32::from(k[15]) {
        return 15;
    }
    let mu = k.iter().position(|&v| x < f32::from(v)).unwrap_or(15);
    if x - f32::from(k[mu - 1]) < f32::from(k[mu]) - x {
        mu - 1
    } else {
        mu
    }
}

/// The `IQ4_NL` grid of one block with scale `d` (rounded to f16 here).
pub(crate) fn nl_grid(d: f32) -> Params {
    let (d, b) = h(d);
    Params {
        sub: 32,
        d: vec![d],
        m: vec![0.0],
        zero: 0,
        qmax: 15,
        head: b.to_vec(),
        levels: Some(&KVALUES_IQ4NL),
    }
}

/// The `IQ4_XS` grid of a super-block whose eight sub-blocks want the scales `scales`: the
/// largest in magnitude sets `d = max/−32` (f16), each scale becomes the 6-bit
/// `ls = round(scale/d) + 32` (clamped to 0..=63), packed as ggml stores them.
pub(crate) fn xs_grid(scales: &[f32; 8]) -> Params {
    let max = scales
        .iter()
        .fold(0.0f32, |a, &x| if x.abs() > a.abs() { x } else { a });
    let d = -max / 32.0;
    let (d16, bd) = h(d);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut scales_h = 0u16;
    let mut scales_l = [0u8; 4];
    let mut dl = vec![0.0f32; 8];
    for (i, &s) in scales.iter().enumerate() {
        let l = (id * s).round_ties_even().clamp(-32.0, 31.0) as i32;
        dl[i] = d16 * l as f32;
        let ls = (l + 32) as u16;
        scales_l[i / 2] |= ((ls & 0xF) as u8) << (4 * (i % 2));
        scales_h |= (ls >> 4) << (2 * i);
    }
    Params {
        sub: 32,
        d: dl,
        m: vec![0.0; 8],
        zero: 0,
        qmax: 15,
        head: [&bd[..], &scales_h.to_le_bytes()[..], &scales_l[..]].concat(),
        levels: Some(&KVALUES_IQ4NL),
    }
}

/// The scale of 32 weights whose signed extreme, shrunk by `clip`, lands on the lowest
/// level (`−127`) exactly: the plain range, without a search.
fn plain_scale(x: &[f32], clip: f32) -> f32 {
    let max = x
        .iter()
        .fold(0.0f32, |a, &v| if v.abs() > a.abs() { v } else { a });
    max * clip / f32::from(KVALUES_IQ4NL[0])
}

/// The plain grid of one span (`IQ4_NL`: 32 weights; `IQ4_XS`: 256).
pub(crate) fn plain(format: Format, w: &[f32], clip: f32) -> Params {
    if format == Format::Iq4Nl {
        return nl_grid(plain_scale(w, clip));
    }
    let mut s = [0.0f32; 8];
    for (i, b) in w.chunks(32).enumerate() {
        s[i] = plain_scale(b, clip);
    }
    xs_grid(&s)
}

/// llama.cpp's scale of 32 weights `x` with per-weight weights `w` (see the module doc).
fn searched_scale(x: &[f32], w: &[f32]) -> f32 {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < EPS {
        return 0.0;
    }
    let k0 = f32::from(KVALUES_IQ4NL[0]);
    let sums = |id: f32| {
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (&v, &wt) in x.iter().zip(w) {
            let q = f32::from(KVALUES_IQ4NL[nearest_level(id * v)]);
            sumqx += wt * q * v;
            sumq2 += wt * q * q;
        }
        (sumqx, sumq2)
    };
    let (sumqx, sumq2) = sums(k0 / max);
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for t in -NTRY..=NTRY {
        let (sumqx, sumq2) = sums((t as f32 + k0) / max);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// llama.cpp's searched grid of one span `x` (`qw`: the importance of each input, `None`:
/// llama.cpp without an imatrix).
pub(crate) fn search(format: Format, x: &[f32], qw: Option<&[f32]>) -> Params {
    let sigma2 = 2.0 * x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let weights: Vec<f32> = match qw {
        Some(q) => x
            .iter()
            .zip(q)
            .map(|(&v, &q)| q * (sigma2 + v * v).sqrt())
            .collect(),
        None => x.iter().map(|v| v * v).collect(),
    };
    let mut s = [0.0f32; 8];
    for (i, (b, w)) in x.chunks(32).zip(weights.chunks(32)).enumerate() {
        s[i] = searched_scale(b, w);
    }
    if format == Format::Iq4Nl {
        nl_grid(s[0])
    } else {
        xs_grid(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_level_ties_upward_and_clamps() {
        assert_eq!(nearest_level(-500.0), 0);
        assert_eq!(nearest_level(500.0), 15);
        // Between 1 (index 8) and 13 (index 9): 7 is the midpoint, which goes up.
        assert_eq!(nearest_level(7.0), 9);
        assert_eq!(nearest_level(6.9), 8);
        assert_eq!(nearest_level(-127.0), 0);
    }

    #[test]
    fn the_signed_extreme_lands_on_the_lowest_level() {
        let mut w: Vec<f32> = (0..32).map(|i| (i as f32 * 0.3).sin()).collect();
        w[5] = -2.54;
        let p = plain(Format::Iq4Nl, &w, 1.0);
        assert_eq!(p.code(5, -2.54), 0);
        let v = p.value(5, 0);
        assert!((v + 2.54).abs() < 2e-3, "{v}");
    }

    #[test]
    fn xs_scales_pack_as_the_reader_unpacks_them() {
        let s = [0.5f32, -0.25, 0.125, 0.0, -1.0, 0.75, 0.3, -0.6];
        let p = xs_grid(&s);
        let mut b = p.head.clone();
        b.resize(crate::io::gguf::iquants::IQ4_XS_BYTES, 0);
        assert_eq!(crate::io::gguf::iquants::iq4_xs_scales(&b).to_vec(), p.d);
        // The largest (−1.0) is represented exactly: ls − 32 = −32 steps of d = 1/32.
        assert_eq!(p.d[4], -1.0);
    }
}
