//! Folding RMSNorm weights into the linear layers that read the norm's output.
//!
//! `W·(γ ⊙ n(x)) = (W·diag γ)·n(x)`: each column `j` of every reader is scaled by `γ_j` and the
//! norm's weight becomes all ones. Without this step the rotation is wrong (seed 004's
//! omission): `γ ⊙ (n(x)·Q) ≠ (γ ⊙ n(x))·Q` unless `γ` is constant.
//!
//! The final norm feeds `lm_head`, often tied to the embedding. A constant `γ_f = c·1`
//! commutes with every rotation (`c·n(x·Q) = (c·n(x))·Q`), so it is kept and the head stays
//! tied. Any other `γ_f` must be folded: `lm_head = E·diag(γ_f)` is then no longer `E`, and the
//! folded model stores `lm_head` explicitly (untied: `V x C` more values). Both are still
//! rotated by the same `Q`.

use crate::model::llama::LlamaWeights;

/// Scales column `j` of `w` (`rows x gamma.len()`) by `gamma[j]`.
fn scale_columns(w: &mut [f32], gamma: &[f32]) {
    for row in w.chunks_exact_mut(gamma.len()) {
        row.iter_mut().zip(gamma).for_each(|(x, g)| *x *= g);
    }
}

/// Replaces a norm weight by ones and returns the old one.
fn unit(g: &mut Vec<f32>) -> Vec<f32> {
    let n = g.len();
    std::mem::replace(g, vec![1.0; n])
}

/// Whether every value of `g` is the first (a norm weight that commutes with a rotation).
pub(crate) fn constant(g: &[f32]) -> bool {
    g.iter().all(|&x| x == g[0])
}

/// Folds every RMSNorm weight into its readers and sets it to one, except a constant final
/// norm in front of a tied head, which is kept so the head stays tied; any other final norm
/// of a tied model unties `lm_head`.
pub fn fold_norms(w: &mut LlamaWeights) {
    for l in &mut w.layers {
        let g = unit(&mut l.attn_norm);
        for m in [&mut l.wq, &mut l.wk, &mut l.wv] {
            scale_columns(m, &g);
        }
        let g = unit(&mut l.ffn_norm);
        for m in [&mut l.w_gate, &mut l.w_up] {
            scale_columns(m, &g);
        }
    }
    if w.lm_head.is_none() && constant(&w.final_norm) {
        return;
    }
    let g = unit(&mut w.final_norm);
    if g.iter().any(|&x| x != 1.0) {
        let mut head = w.lm_head().to_vec();
        scale_columns(&mut head, &g);
        w.lm_head = Some(head);
    }
}
