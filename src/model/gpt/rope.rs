//! Rotary positions in the GPT's attention (`Position::Rope`): every head's query and key are
//! rotated by their position after the projection (`nn::rope`, Hugging Face's half-split
//! pairs), so `q·k` depends on the tokens' relative position even when `W_Q, W_K` are frozen.
//! The backward pass rotates the gradients back (a rotation's transpose is the rotation by
//! the opposite angle).

use crate::nn::rope::{self, RopeLayout};

/// The cosines and sines of one batch's positions `0..t` for heads of width `d`.
pub(crate) struct RopeTables {
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// `−sin`: the inverse rotation.
    neg_sin: Vec<f32>,
    t: usize,
    d: usize,
}

impl RopeTables {
    /// The tables of positions `0..t`, heads of width `d` (even), base θ `theta`.
    pub fn new(t: usize, d: usize, theta: f64) -> Self {
        let half = d / 2;
        let (mut cos, mut sin) = (vec![0.0; t * half], vec![0.0; t * half]);
        rope::tables(&mut cos, &mut sin, 0..t, d, theta);
        let neg_sin = sin.iter().map(|s| -s).collect();
        RopeTables {
            cos,
            sin,
            neg_sin,
            t,
            d,
        }
    }

    fn sin(&self, inverse: bool) -> &[f32] {
        if inverse { &self.neg_sin } else { &self.sin }
    }

    /// Rotates `x`, `b` sequences of `t` rows of `h` heads (`(B, T, C)`, `C = h·d`), each row
    /// by its position; `inverse` rotates back.
    pub fn rows(&self, x: &mut [f32], b: usize, h: usize, inverse: bool) {
        let c = h * self.d;
        for seq in x[..b * self.t * c].chunks_exact_mut(self.t * c) {
            let s = self.sin(inverse);
            rope::apply(seq, c, h, self.d, &self.cos, s, RopeLayout::HalfSplit);
        }
    }

    /// Rotates `x` in the split-heads layout `(B, H, T, D)` (`bh = B·H` blocks of `t` rows).
    pub fn split(&self, x: &mut [f32], bh: usize, inverse: bool) {
        let block = self.t * self.d;
        for head in x[..bh * block].chunks_exact_mut(block) {
            let s = self.sin(inverse);
            rope::apply(head, self.d, 1, self.d, &self.cos, s, RopeLayout::HalfSplit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two layouts rotate the same head the same way, and `inverse` undoes the rotation.
    #[test]
    fn rows_and_split_agree_and_inverse_undoes() {
        let (b, t, h, d) = (2, 5, 3, 4);
        let c = h * d;
        let x: Vec<f32> = (0..b * t * c).map(|i| (i as f32 * 0.37).sin()).collect();
        let r = RopeTables::new(t, d, 10_000.0);
        let mut rows = x.clone();
        r.rows(&mut rows, b, h, false);
        let mut split = vec![0.0; x.len()];
        crate::nn::attention::split_heads(&mut split, &x, t, h, d);
        r.split(&mut split, b * h, false);
        let mut merged = vec![0.0; x.len()];
        crate::nn::attention::merge_heads(&mut merged, &split, t, h, d);
        assert_eq!(rows, merged);
        // Position 0 is not rotated; later ones are, norm-preserving.
        assert_eq!(rows[..c], x[..c]);
        assert_ne!(rows[c..2 * c], x[c..2 * c]);
        r.rows(&mut rows, b, h, true);
        for (a, e) in rows.iter().zip(&x) {
            assert!((a - e).abs() < 1e-6);
        }
    }
}
