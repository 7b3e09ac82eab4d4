//! Reading what the theory measures need out of a trained [`Gpt`]: the input each layer's
//! attention projects (pre-LN: `LN1(x)`; post-LN: the block input `x`), and each head's
//! `W_Q`, `W_K` as `d_model x d_k` matrices (`q = x W`). An inherent `impl` kept here so
//! `model/` is untouched.

use super::{Matrix, TheoryError};
use crate::model::{Gpt, ModelError, NormPlacement};

impl Gpt {
    /// Runs `tokens` (one sequence, `T <= context`) without dropout and returns, per layer,
    /// the `(T, C)` matrix that layer's attention projects with `W_Q` and `W_K`.
    pub fn attention_inputs(&mut self, tokens: &[u32]) -> crate::Result<Vec<Matrix>> {
        let (t, c) = (tokens.len(), self.cfg.d_model);
        self.logits(tokens, 1, t)?;
        let acts = self
            .acts
            .as_ref()
            .ok_or_else(|| ModelError::Batch("internal: no activations after forward".into()))?;
        let n = t * c;
        let mut out = Vec::with_capacity(self.cfg.n_layer);
        for l in 0..self.cfg.n_layer {
            let x: &[f32] = match self.cfg.norm {
                NormPlacement::Pre => &acts.layers[l].ln1[..n],
                NormPlacement::Post if l == 0 => &acts.x0[..n],
                NormPlacement::Post => self.block_output(&acts.layers[l - 1], n),
            };
            out.push(Matrix::from_f32(t, c, x)?);
        }
        Ok(out)
    }

    /// Head `h`'s projection `which` (0: `W_Q`, 1: `W_K`) of layer `l` as a `d_model x d_k`
    /// matrix `W` with `q = x W` (the stored weight is `out x in`; its rows `h·D..(h+1)·D`,
    /// transposed).
    pub fn head_projection(&self, l: usize, which: usize, h: usize) -> Result<Matrix, TheoryError> {
        let (c, heads) = (self.cfg.d_model, self.cfg.n_head);
        if l >= self.cfg.n_layer || which > 1 || h >= heads {
            return Err(TheoryError::Shape(format!(
                "layer {l}, projection {which}, head {h} of a {}-layer, {heads}-head model",
                self.cfg.n_layer
            )));
        }
        let d = c / heads;
        let stored = self.attn_weight(l, which);
        // Identity queries have no tensor: their weight is I_C.
        let eye: Vec<f32>;
        let w = if stored.is_empty() {
            eye = (0..c * c)
                .map(|k| if k / c == k % c { 1.0 } else { 0.0 })
                .collect();
            &eye[..]
        } else {
            stored
        };
        let mut data = vec![0.0; c * d];
        for o in 0..d {
            let row = &w[(h * d + o) * c..(h * d + o + 1) * c];
            for (i, &x) in row.iter().enumerate() {
                data[i * d + o] = x as f64;
            }
        }
        Matrix::new(c, d, data)
    }
}
