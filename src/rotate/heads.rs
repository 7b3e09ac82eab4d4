//! QuaRot's per-head value/output rotation (R2), folded offline: each key/value head `g`'s
//! values are rotated by an orthogonal `R_g` (`D x D`) and every query head reading them
//! un-rotates its attention output inside `o_proj`, so the model computes the same function
//! while `o_proj`'s input loses its per-head outliers.
//!
//! Row-vector convention (`v = x·W_vᵀ`): `v_g' = v_g·R_g` needs `W_v,g ← R_gᵀ·W_v,g` (rows
//! `g·D..(g+1)·D` of `v_proj`); attention is linear in the values, so query head `h`'s output
//! becomes `o_h·R_g(h)` with `g(h) = h / (H/K)` (grouped-query attention: one rotation per
//! key/value head, shared by its query heads), and `o_proj`'s column block `h` becomes
//! `W_o[:, h]·R_g(h)`. Softmax weights do not involve values, so nothing else changes.
//! A value bias (Qwen2) is part of `v`, so it turns with its rows: `b_v,g ← b_v,g·R_g`;
//! leaving it alone would change the function.

use super::RotateError;
use super::rotation::{Rotation, RotationKind};
use crate::model::llama::{LayerWeights, LlamaWeights};

/// Rotates every layer's value heads by `R_g` (one per key/value head, drawn from `seed`;
/// layers and heads draw different matrices) and compensates in `o_proj`, in f64.
pub fn rotate_value_heads(
    w: &mut LlamaWeights,
    kind: RotationKind,
    seed: u64,
) -> Result<(), RotateError> {
    let (nkv, dh) = (w.cfg.n_kv_head, w.cfg.head_dim());
    let shape = HeadShape::of(&w.cfg);
    for (l, layer) in w.layers.iter_mut().enumerate() {
        for g in 0..nkv {
            let s = seed
                .wrapping_mul(1_000_003)
                .wrapping_add((l * nkv + g) as u64);
            let r = Rotation::of_kind(kind, dh, s)?.dense();
            rotate_value_head(layer, &shape, g, &r);
        }
    }
    Ok(())
}

/// The shapes the value-head rotation needs: width `C`, query heads `H`, key/value heads `K`,
/// head size `D`.
#[derive(Debug, Clone, Copy)]
pub struct HeadShape {
    /// Width `C`.
    pub c: usize,
    /// Query heads `H`.
    pub nh: usize,
    /// Key/value heads `K`.
    pub nkv: usize,
    /// Head size `D`.
    pub dh: usize,
}

impl HeadShape {
    /// The shapes of a model `cfg`.
    pub fn of(cfg: &crate::model::llama::LlamaConfig) -> Self {
        HeadShape {
            c: cfg.d_model,
            nh: cfg.n_head,
            nkv: cfg.n_kv_head,
            dh: cfg.head_dim(),
        }
    }
}

/// Rotates key/value head `g` of `layer` by the dense `r` (`D x D`, row-major): `v_g ← v_g·R`
/// (rows of `v_proj`, and the value bias) and `o_proj`'s column blocks of the query heads
/// reading it `W[:, h] ← W[:, h]·R`.
pub fn rotate_value_head(layer: &mut LayerWeights, s: &HeadShape, g: usize, r: &[f64]) {
    let HeadShape { c, nh, nkv, dh } = *s;
    let qd = nh * dh;
    let per = nh / nkv;
    // v rows g·D..: W ← Rᵀ·W, i.e. row i of the block = Σ_k R[k][i]·row k.
    let block = &mut layer.wv[g * dh * c..(g + 1) * dh * c];
    let old: Vec<f64> = block.iter().map(|&x| f64::from(x)).collect();
    for i in 0..dh {
        for j in 0..c {
            let v: f64 = (0..dh).map(|k| r[k * dh + i] * old[k * c + j]).sum();
            block[i * c + j] = v as f32;
        }
    }
    if let Some(bias) = layer.qkv_bias.as_mut() {
        // The same map as the rows: b ← b·R (element i = Σ_k b[k]·R[k][i]).
        let b = &mut bias.v[g * dh..(g + 1) * dh];
        let old: Vec<f64> = b.iter().map(|&x| f64::from(x)).collect();
        for (i, o) in b.iter_mut().enumerate() {
            *o = (0..dh).map(|k| old[k] * r[k * dh + i]).sum::<f64>() as f32;
        }
    }
    // o_proj column blocks of the query heads reading head g: W[:, h] ← W[:, h]·R.
    for h in g * per..(g + 1) * per {
        for row in layer.wo.chunks_exact_mut(qd) {
            let b = &mut row[h * dh..(h + 1) * dh];
            let old: Vec<f64> = b.iter().map(|&x| f64::from(x)).collect();
            for (j, o) in b.iter_mut().enumerate() {
                *o = (0..dh).map(|k| old[k] * r[k * dh + j]).sum::<f64>() as f32;
            }
        }
    }
}
