//! SwiGLU's gate (inference): `y = silu(g) ⊙ u` with `silu(g) = g·σ(g) = g / (1 + e^(−g))`, as
//! Hugging Face's `LlamaMLP` (`act_fn(gate_proj(x)) * up_proj(x)`) and llama.cpp's
//! `ggml_swiglu`. One vectorised [`simd::exp`] per element instead of a libm call.

use super::simd::{self, dispatch};
use rayon::prelude::*;

/// Elements per rayon task.
const CHUNK: usize = 1 << 13;

/// `g ← silu(g) ⊙ u`, element-wise, in place (the gate's buffer becomes the output).
pub fn forward(g: &mut [f32], u: &[f32]) {
    assert_eq!(g.len(), u.len(), "swiglu: shapes");
    if g.len() <= CHUNK {
        forward_kernel(g, u);
        return;
    }
    g.par_chunks_mut(CHUNK)
        .zip(u.par_chunks(CHUNK))
        .for_each(|(g, u)| forward_kernel(g, u));
}

dispatch! {
    /// [`forward`] on the calling thread.
    pub fn forward_kernel(g: &mut [f32], u: &[f32]) {
        for (x, &uv) in g.iter_mut().zip(u) {
            *x = *x / (1.0 + simd::exp(-*x)) * uv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::simd::{available, with_isa};

    #[test]
    fn matches_f64_on_every_isa() {
        let g: Vec<f32> = (0..4001).map(|i| (i as f32 - 2000.0) * 0.01).collect();
        let u: Vec<f32> = (0..4001).map(|i| ((i % 13) as f32 - 6.0) * 0.3).collect();
        for isa in available() {
            let mut y = g.clone();
            with_isa(isa, || forward_kernel(&mut y, &u));
            for ((&o, &gv), &uv) in y.iter().zip(&g).zip(&u) {
                let (gd, ud) = (gv as f64, uv as f64);
                let want = gd / (1.0 + (-gd).exp()) * ud;
                assert!(
                    (o as f64 - want).abs() < 1e-6 * (1.0 + want.abs()),
                    "{isa:?} g={gv} u={uv}: {o} vs {want}"
                );
            }
        }
    }
}
