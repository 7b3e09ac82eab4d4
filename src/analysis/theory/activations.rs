//! Reading what the theory measures need out of a trained [`Gpt`], through its public
//! activation view ([`Gpt::activations`]) and weights ([`Gpt::attention_weight`]): the input
//! each layer's attention projects (pre-LN: `LN1(x)`; post-LN: the block input `x`), and each
//! head's `W_Q`, `W_K` as `d_model x d_k` matrices (`q = x W`).

use super::{Matrix, TheoryError};
use crate::model::{AttnWeight, Gpt, ModelError};

/// Runs `tokens` (one sequence, `T <= context`) without dropout and returns, per layer, the
/// `(T, C)` matrix that layer's attention projects with `W_Q` and `W_K`.
pub fn attention_inputs(model: &mut Gpt, tokens: &[u32]) -> crate::Result<Vec<Matrix>> {
    let (t, c, layers) = (tokens.len(), model.config().d_model, model.config().n_layer);
    model.logits(tokens, 1, t)?;
    let missing = || ModelError::Batch("internal: no activations after a forward pass".into());
    let acts = model.activations().ok_or_else(missing)?;
    (0..layers)
        .map(|l| {
            let x = acts.attention_input(l).ok_or_else(missing)?;
            Ok(Matrix::from_f32(t, c, x)?)
        })
        .collect()
}

/// Head `h`'s projection `w` (`W_Q` or `W_K`) of layer `l` as a `d_model x d_k` matrix `W`
/// with `q = x W` (the stored weight is `out x in`; its rows `h·D..(h+1)·D`, transposed).
pub fn head_projection(
    model: &Gpt,
    l: usize,
    w: AttnWeight,
    h: usize,
) -> Result<Matrix, TheoryError> {
    let cfg = model.config();
    let (c, heads) = (cfg.d_model, cfg.n_head);
    if l >= cfg.n_layer || !AttnWeight::QK.contains(&w) || h >= heads {
        return Err(TheoryError::Shape(format!(
            "layer {l}, projection {w:?}, head {h} of a {}-layer, {heads}-head model",
            cfg.n_layer
        )));
    }
    let d = c / heads;
    let stored = model.attention_weight(l, w);
    // Identity queries have no tensor: their weight is I_C.
    let eye: Vec<f32>;
    let weight = if stored.is_empty() {
        eye = (0..c * c)
            .map(|k| if k / c == k % c { 1.0 } else { 0.0 })
            .collect();
        &eye[..]
    } else {
        stored
    };
    let mut data = vec![0.0; c * d];
    for o in 0..d {
        let row = &weight[(h * d + o) * c..(h * d + o + 1) * c];
        for (i, &x) in row.iter().enumerate() {
            data[i * d + o] = x as f64;
        }
    }
    Matrix::new(c, d, data)
}
