//! Rotary position embeddings (RoPE, Su et al. 2021) in both storage layouts in use.
//!
//! Head dimension pairs `(a, b)` at position `p` are rotated by the angle `p·θ^(−2i/D)`,
//! `i < D/2`: `a' = a·cos − b·sin`, `b' = b·cos + a·sin`. The layouts differ only in which
//! elements of a `D`-wide head form pair `i`:
//! - [`RopeLayout::Interleaved`]: `(2i, 2i+1)`, llama.cpp's `ggml_rope` (mode 0), the order
//!   of the Q/K rows of a GGUF file.
//! - [`RopeLayout::HalfSplit`]: `(i, i + D/2)`, Hugging Face's `rotate_half`
//!   (`apply_rotary_pos_emb`), the order of a `model.safetensors`.
//!
//! The two are the same map up to a permutation of each head's rows of `W_Q` and `W_K`, and
//! attention scores `q·k` do not see a permutation applied to both, so a model runs in the
//! layout its weights are stored in. Angles are computed in f64 and rounded once.

use super::simd::dispatch;

/// Which dimensions of a head are rotated together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeLayout {
    /// Pairs `(2i, 2i+1)` (llama.cpp, GGUF).
    Interleaved,
    /// Pairs `(i, i + D/2)` (Hugging Face).
    HalfSplit,
}

/// Cosines and sines of `p·θ^(−2i/D)` for positions `p` in `positions` and `i < D/2`, written
/// row by row into `cos`, `sin` (`len(positions) x D/2` each).
pub fn tables(
    cos: &mut [f32],
    sin: &mut [f32],
    positions: std::ops::Range<usize>,
    d: usize,
    theta: f64,
) {
    let half = d / 2;
    assert!(
        cos.len() == positions.len() * half && sin.len() == cos.len(),
        "rope: table sizes"
    );
    for (p, (c, s)) in positions.zip(cos.chunks_exact_mut(half).zip(sin.chunks_exact_mut(half))) {
        for i in 0..half {
            let a = p as f64 * theta.powf(-2.0 * i as f64 / d as f64);
            c[i] = a.cos() as f32;
            s[i] = a.sin() as f32;
        }
    }
}

/// Rotates `heads` heads of width `d` at the start of each of `T` rows of `x` (row `t` starts
/// at `t·ld`; `T = cos.len() / (d/2)`), row `t` by the angles of `cos`/`sin` row `t`.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    x: &mut [f32],
    ld: usize,
    heads: usize,
    d: usize,
    cos: &[f32],
    sin: &[f32],
    layout: RopeLayout,
) {
    let half = d / 2;
    assert!(half > 0 && d.is_multiple_of(2), "rope: odd head width {d}");
    let rows = cos.len() / half;
    assert!(
        sin.len() == cos.len()
            && ld >= heads * d
            && (rows == 0 || x.len() >= (rows - 1) * ld + heads * d),
        "rope: shapes"
    );
    for (t, (c, s)) in cos
        .chunks_exact(half)
        .zip(sin.chunks_exact(half))
        .enumerate()
    {
        let row = &mut x[t * ld..t * ld + heads * d];
        match layout {
            RopeLayout::Interleaved => interleaved_row(row, c, s),
            RopeLayout::HalfSplit => half_split_row(row, c, s),
        }
    }
}

dispatch! {
    /// Interleaved pairs of every head in `row` (heads of width `2·cos.len()`).
    fn interleaved_row(row: &mut [f32], cos: &[f32], sin: &[f32]) {
        for hd in row.chunks_exact_mut(2 * cos.len()) {
            for ((p, &c), &s) in hd.chunks_exact_mut(2).zip(cos).zip(sin) {
                let (a, b) = (p[0], p[1]);
                p[0] = a * c - b * s;
                p[1] = b * c + a * s;
            }
        }
    }
}

dispatch! {
    /// Half-split pairs of every head in `row`.
    fn half_split_row(row: &mut [f32], cos: &[f32], sin: &[f32]) {
        let half = cos.len();
        for hd in row.chunks_exact_mut(2 * half) {
            let (lo, hi) = hd.split_at_mut(half);
            for (((a, b), &c), &s) in lo.iter_mut().zip(hi.iter_mut()).zip(cos).zip(sin) {
                let (x, y) = (*a, *b);
                *a = x * c - y * s;
                *b = y * c + x * s;
            }
        }
    }
}
