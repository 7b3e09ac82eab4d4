//! The fits of weight-space alignment: which exact symmetry of a (norm-folded) Llama model
//! brings model B's weights closest to model A's, in Frobenius norm over every matrix.
//!
//! Every symmetry acts on a set of vectors as `x ← x·R` (row vectors):
//! - the residual stream (`R`, `C x C`): the rows of every reader (q, k, v, gate, up, the
//!   embedding and an untied head) and the columns of every writer (o, down), as
//!   [`super::rotate_weights`] applies it;
//! - a value head `g` (`R_g`, `D x D`): the columns of its `v_proj` rows, its bias, and the
//!   rows of `o_proj`'s column blocks of the query heads reading it ([`super::heads::rotate_value_head`]);
//! - the FFN units of a layer: a permutation of gate and up rows and down columns (SwiGLU is
//!   elementwise, so only permutations commute with it, not rotations).
//!
//! With `X` B's vectors and `Y` A's, stacked as rows, `min ‖Y − X·R‖` over orthogonal `R` is
//! `R = U·Vᵀ` for `Xᵀ·Y = U·Σ·Vᵀ` (orthogonal Procrustes, [`super::procrustes::polar`]); the
//! permutation maximises `Σ_i ⟨a_i, b_π(i)⟩` (the Hungarian method).

use super::RotateError;
use super::assignment::max_assignment;
use super::heads::HeadShape;
use super::options::ResidualFit;
use super::procrustes::polar;
use crate::model::llama::{LayerWeights, LlamaWeights};
use crate::nn::matmul_f64::add_at_b_f64;

/// Rows converted to f64 per block of a cross-product (keeps the f64 copy small).
const BLOCK: usize = 1024;

/// `‖A − B‖_F / ‖A‖_F` over every matrix and bias both models hold (the embedding; the head
/// when either model has its own; each layer's seven matrices and the q/k/v biases).
/// RMSNorm weights are left out: after folding they are ones (or a constant final norm).
pub fn relative_distance(a: &LlamaWeights, b: &LlamaWeights) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    let mut add = |x: &[f32], y: &[f32]| {
        for (&p, &q) in x.iter().zip(y) {
            let (p, q) = (f64::from(p), f64::from(q));
            diff += (p - q) * (p - q);
            norm += p * p;
        }
    };
    add(&a.embed, &b.embed);
    if a.lm_head.is_some() || b.lm_head.is_some() {
        add(a.lm_head(), b.lm_head());
    }
    for (la, lb) in a.layers.iter().zip(&b.layers) {
        for (x, y) in matrices(la).into_iter().zip(matrices(lb)) {
            add(x, y);
        }
        if let (Some(x), Some(y)) = (&la.qkv_bias, &lb.qkv_bias) {
            add(&x.q, &y.q);
            add(&x.k, &y.k);
            add(&x.v, &y.v);
        }
    }
    if norm == 0.0 {
        0.0
    } else {
        (diff / norm).sqrt()
    }
}

fn matrices(l: &LayerWeights) -> [&[f32]; 7] {
    [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
}

/// `m += Xᵀ·Y` for the rows of `x` and `y` (`rows x c` each), through f64 in blocks.
fn add_rows(m: &mut [f64], x: &[f32], y: &[f32], c: usize) {
    for (xb, yb) in x.chunks(BLOCK * c).zip(y.chunks(BLOCK * c)) {
        let rows = xb.len() / c;
        let xf: Vec<f64> = xb.iter().map(|&v| f64::from(v)).collect();
        let yf: Vec<f64> = yb.iter().map(|&v| f64::from(v)).collect();
        add_at_b_f64(m, &xf, &yf, rows, c, c);
    }
}

/// `m += Xᵀ·Y` for the columns of `x` and `y` (`c x cols` each) taken as rows.
fn add_columns(m: &mut [f64], x: &[f32], y: &[f32], c: usize, cols: usize) {
    let mut j0 = 0;
    while j0 < cols {
        let n = BLOCK.min(cols - j0);
        let take = |w: &[f32]| -> Vec<f64> {
            let mut t = vec![0.0f64; n * c];
            for i in 0..c {
                for j in 0..n {
                    t[j * c + i] = f64::from(w[i * cols + j0 + j]);
                }
            }
            t
        };
        add_at_b_f64(m, &take(x), &take(y), n, c, c);
        j0 += n;
    }
}

/// The residual-stream map (`C x C`, row-major) of `fit`'s kind minimising the distance of
/// `B·R` (every weight moved as [`super::rotate_weights`] moves it) to `A`: the Procrustes
/// rotation, or the permutation maximising `tr(Rᵀ·XᵀY)` (Git Re-Basin's weight matching of
/// residual channels).
pub fn residual_map(
    a: &LlamaWeights,
    b: &LlamaWeights,
    fit: ResidualFit,
) -> Result<Vec<f64>, RotateError> {
    let c = a.cfg.d_model;
    let m = residual_cross(a, b);
    match fit {
        ResidualFit::Rotation => polar(&m, c),
        ResidualFit::Permutation => {
            if m.iter().any(|x| !x.is_finite()) {
                return Err(RotateError::Invalid(
                    "weight matching on weights that are not finite".into(),
                ));
            }
            let perm = max_assignment(&m, c);
            let mut r = vec![0.0f64; c * c];
            for (i, &j) in perm.iter().enumerate() {
                r[i * c + j] = 1.0;
            }
            Ok(r)
        }
    }
}

/// `Xᵀ·Y` over every residual vector: B's as `X`, A's as `Y` (`C x C`).
fn residual_cross(a: &LlamaWeights, b: &LlamaWeights) -> Vec<f64> {
    let c = a.cfg.d_model;
    let (qd, f) = (a.cfg.n_head * a.cfg.head_dim(), a.cfg.d_ff);
    let mut m = vec![0.0f64; c * c];
    add_rows(&mut m, &b.embed, &a.embed, c);
    if a.lm_head.is_some() || b.lm_head.is_some() {
        add_rows(&mut m, b.lm_head(), a.lm_head(), c);
    }
    for (la, lb) in a.layers.iter().zip(&b.layers) {
        for (x, y) in [
            (&lb.wq, &la.wq),
            (&lb.wk, &la.wk),
            (&lb.wv, &la.wv),
            (&lb.w_gate, &la.w_gate),
            (&lb.w_up, &la.w_up),
        ] {
            add_rows(&mut m, x, y, c);
        }
        add_columns(&mut m, &lb.wo, &la.wo, c, qd);
        add_columns(&mut m, &lb.w_down, &la.w_down, c, f);
    }
    m
}

/// The rotation `R_g` (`D x D`) of value head `g` minimising the distance of B's layer `lb`
/// to A's `la` over that head's vectors.
pub fn value_head_rotation(
    la: &LayerWeights,
    lb: &LayerWeights,
    s: &HeadShape,
    g: usize,
) -> Result<Vec<f64>, RotateError> {
    let HeadShape { c, nh, nkv, dh } = *s;
    let (qd, per) = (nh * dh, nh / nkv);
    let mut m = vec![0.0f64; dh * dh];
    // v_proj rows g·D..: the vectors are the block's columns.
    let (vb, va) = (
        &lb.wv[g * dh * c..(g + 1) * dh * c],
        &la.wv[g * dh * c..(g + 1) * dh * c],
    );
    for i in 0..dh {
        for k in 0..dh {
            m[i * dh + k] += (0..c)
                .map(|j| f64::from(vb[i * c + j]) * f64::from(va[k * c + j]))
                .sum::<f64>();
        }
    }
    if let (Some(x), Some(y)) = (&lb.qkv_bias, &la.qkv_bias) {
        let (x, y) = (&x.v[g * dh..(g + 1) * dh], &y.v[g * dh..(g + 1) * dh]);
        for i in 0..dh {
            for k in 0..dh {
                m[i * dh + k] += f64::from(x[i]) * f64::from(y[k]);
            }
        }
    }
    // o_proj: every row's column block of each query head reading head g.
    for h in g * per..(g + 1) * per {
        for (rb, ra) in lb.wo.chunks_exact(qd).zip(la.wo.chunks_exact(qd)) {
            let (x, y) = (&rb[h * dh..(h + 1) * dh], &ra[h * dh..(h + 1) * dh]);
            for i in 0..dh {
                let xi = f64::from(x[i]);
                for k in 0..dh {
                    m[i * dh + k] += xi * f64::from(y[k]);
                }
            }
        }
    }
    polar(&m, dh)
}

/// The permutation `π` of B's FFN units matching A's (`π[i]`: B's unit for A's unit `i`),
/// maximising the summed inner products of the units' gate rows, up rows and down columns.
pub fn ffn_permutation(la: &LayerWeights, lb: &LayerWeights, c: usize, f: usize) -> Vec<usize> {
    let mut s = vec![0.0f64; f * f];
    // Down: columns are the units, so Aᵀ·B over the C rows directly.
    let wide = |w: &[f32]| -> Vec<f64> { w.iter().map(|&v| f64::from(v)).collect() };
    add_at_b_f64(&mut s, &wide(&la.w_down), &wide(&lb.w_down), c, f, f);
    // Gate and up: rows are the units; transpose to C x F first.
    let tall = |w: &[f32]| -> Vec<f64> {
        let mut t = vec![0.0f64; c * f];
        for i in 0..f {
            for j in 0..c {
                t[j * f + i] = f64::from(w[i * c + j]);
            }
        }
        t
    };
    add_at_b_f64(&mut s, &tall(&la.w_gate), &tall(&lb.w_gate), c, f, f);
    add_at_b_f64(&mut s, &tall(&la.w_up), &tall(&lb.w_up), c, f, f);
    max_assignment(&s, f)
}

/// Reorders B's FFN units: unit `i` becomes the old unit `perm[i]` (gate and up rows, down
/// columns together, so the layer computes the same function).
pub fn permute_ffn(l: &mut LayerWeights, perm: &[usize], c: usize) {
    let f = perm.len();
    for w in [&mut l.w_gate, &mut l.w_up] {
        let old = w.clone();
        for (i, &p) in perm.iter().enumerate() {
            w[i * c..(i + 1) * c].copy_from_slice(&old[p * c..(p + 1) * c]);
        }
    }
    for row in l.w_down.chunks_exact_mut(f) {
        let old = row.to_vec();
        for (i, &p) in perm.iter().enumerate() {
            row[i] = old[p];
        }
    }
}
