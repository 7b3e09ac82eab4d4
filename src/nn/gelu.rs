//! GELU in GPT-2's tanh form: `y = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))`
//! (`torch.nn.GELU(approximate="tanh")`).
//!
//! Computed as `y = x·σ(2u)` with `u = √(2/π)(x + 0.044715x³)`, since `½(1 + tanh u) = σ(2u)`:
//! one vectorised [`simd::exp`] per element instead of a libm `tanhf`, and no cancellation
//! for large negative `x`.

use super::simd::{self, dispatch};
use rayon::prelude::*;

const S: f32 = 0.797_884_6; // sqrt(2/pi)
/// Elements per rayon task: big enough to amortise scheduling, small enough to split.
const CHUNK: usize = 1 << 14;
const A: f32 = 0.044_715;

/// Forward, element-wise.
pub fn forward(y: &mut [f32], x: &[f32]) {
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(y, x)| forward_kernel(y, x));
}

/// Backward: `dx = dy · gelu'(x)` (overwrites `dx`).
pub fn backward(dx: &mut [f32], dy: &[f32], x: &[f32]) {
    dx.par_chunks_mut(CHUNK)
        .zip(dy.par_chunks(CHUNK))
        .zip(x.par_chunks(CHUNK))
        .for_each(|((dx, dy), x)| backward_kernel(dx, dy, x));
}

/// `-2u = -2√(2/π)(x + 0.044715x³)` in fused multiply-adds: one `vfmadd` each in the
/// dispatched kernels (the baseline build calls `fmaf`, slower but bit-identical).
#[inline(always)]
fn minus_2u(v: f32) -> f32 {
    v * (v * v).mul_add(-2.0 * S * A, -2.0 * S)
}

dispatch! {
    fn forward_kernel(y: &mut [f32], x: &[f32]) {
        for (o, &v) in y.iter_mut().zip(x) {
            *o = v / (1.0 + simd::exp(minus_2u(v)));
        }
    }
}

dispatch! {
    // d/dx [x·σ(2u)] = σ + x·σ(1-σ)·2u', u' = S(1 + 3Ax²).
    fn backward_kernel(dx: &mut [f32], dy: &[f32], x: &[f32]) {
        for ((d, &g), &v) in dx.iter_mut().zip(dy).zip(x) {
            let sig = 1.0 / (1.0 + simd::exp(minus_2u(v)));
            let du = (v * v).mul_add(3.0 * S * A, S);
            // σ + 2x·σ(1-σ)·u' = σ·(1 + 2x(1-σ)u')
            *d = g * sig * (2.0 * v * du).mul_add(1.0 - sig, 1.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gelu64(x: f64) -> f64 {
        let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        0.5 * x * (1.0 + u.tanh())
    }

    #[test]
    fn matches_the_tanh_formula_and_its_derivative() {
        let x: Vec<f32> = (0..20_001).map(|i| (i as f32 - 10_000.0) * 1e-3).collect();
        let mut y = vec![0.0; x.len()];
        forward(&mut y, &x);
        let ones = vec![1.0; x.len()];
        let mut d = vec![0.0; x.len()];
        backward(&mut d, &ones, &x);
        for ((&xv, &yv), &dv) in x.iter().zip(&y).zip(&d) {
            let want = gelu64(xv as f64);
            assert!((yv as f64 - want).abs() < 1e-6 * (1.0 + want.abs()), "{xv}");
            let h = 1e-5;
            let num = (gelu64(xv as f64 + h) - gelu64(xv as f64 - h)) / (2.0 * h);
            assert!((dv as f64 - num).abs() < 1e-5, "{xv}: {dv} vs {num}");
        }
    }
}
