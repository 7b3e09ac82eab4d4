//! Rotating a (norm-folded) Llama model's residual stream by `Q`, in f64.
//!
//! With weights stored `out x in` (`y = W·x`) and the residual stream carried as `x·Q` (row
//! vectors): readers `W ← W·Q` (q, k, v, gate, up, lm_head), writers `W ← Qᵀ·W` (o, down),
//! embedding `E ← E·Q`. A tied `lm_head` is the embedding and is rotated with it.

use super::RotateError;
use super::rotation::Rotation;
use crate::model::llama::LlamaWeights;

/// `W_down ← W_down·H` for every layer (`H` of order `F`): the weight half of QuaRot's online
/// Hadamard on `down_proj`'s input; the engine applies `x ← x·H` to the activation
/// ([`crate::nn::hadamard_rows::OnlineHadamard`]).
pub fn rotate_down_inputs(w: &mut LlamaWeights, h: &Rotation) -> Result<(), RotateError> {
    if h.order() != w.cfg.d_ff {
        return Err(RotateError::Invalid(format!(
            "rotation of order {} for FFN width {}",
            h.order(),
            w.cfg.d_ff
        )));
    }
    for l in &mut w.layers {
        rotate_reader(&mut l.w_down, h);
    }
    Ok(())
}

/// `W ← W·Q` for `W` of `rows x C`, through f64.
/// Works in blocks of rows so the f64 copy stays small (cache-sized, no huge allocation).
fn rotate_reader(w: &mut [f32], r: &Rotation) {
    const BLOCK_ROWS: usize = 2048;
    let c = r.order();
    let mut x = vec![0.0f64; BLOCK_ROWS.min(w.len() / c) * c];
    for block in w.chunks_mut(BLOCK_ROWS * c) {
        let x = &mut x[..block.len()];
        x.iter_mut()
            .zip(block.iter())
            .for_each(|(o, &v)| *o = f64::from(v));
        r.apply_rows(x);
        block
            .iter_mut()
            .zip(x.iter())
            .for_each(|(o, &v)| *o = v as f32);
    }
}

/// `W ← Qᵀ·W` for `W` of `C x cols`: `(Wᵀ·Q)ᵀ`, through f64.
fn rotate_writer(w: &mut [f32], cols: usize, r: &Rotation) {
    let c = r.order();
    let mut t = vec![0.0f64; w.len()];
    for i in 0..c {
        for j in 0..cols {
            t[j * c + i] = f64::from(w[i * cols + j]);
        }
    }
    r.apply_rows(&mut t);
    for i in 0..c {
        for j in 0..cols {
            w[i * cols + j] = t[j * c + i] as f32;
        }
    }
}

/// Rotates every weight of `w` by `r`. The model must already have its norms folded
/// ([`super::fold::fold_norms`]): an RMSNorm with a non-constant weight does not commute
/// with `Q`, and this returns an error instead of a silently wrong model.
pub fn rotate_weights(w: &mut LlamaWeights, r: &Rotation) -> Result<(), RotateError> {
    let c = w.cfg.d_model;
    if r.order() != c {
        return Err(RotateError::Invalid(format!(
            "rotation of order {} for width {c}",
            r.order()
        )));
    }
    let unit = |g: &[f32]| g.iter().all(|&x| x == 1.0);
    // A constant final norm commutes with the rotation (fold_norms keeps it for a tied head).
    if !super::fold::constant(&w.final_norm)
        || w.layers
            .iter()
            .any(|l| !unit(&l.attn_norm) || !unit(&l.ffn_norm))
    {
        return Err(RotateError::Invalid(
            "RMSNorm weights are not folded: fold them into the following linears first".into(),
        ));
    }
    let (qd, f) = (w.cfg.n_head * w.cfg.head_dim(), w.cfg.d_ff);
    rotate_reader(&mut w.embed, r);
    if let Some(h) = w.lm_head.as_mut() {
        rotate_reader(h, r);
    }
    for l in &mut w.layers {
        for m in [&mut l.wq, &mut l.wk, &mut l.wv, &mut l.w_gate, &mut l.w_up] {
            rotate_reader(m, r);
        }
        rotate_writer(&mut l.wo, qd, r);
        rotate_writer(&mut l.w_down, f, r);
    }
    Ok(())
}
