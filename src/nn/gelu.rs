//! GELU in GPT-2's tanh form: `y = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))`
//! (`torch.nn.GELU(approximate="tanh")`).

use rayon::prelude::*;

const S: f32 = 0.797_884_6; // sqrt(2/pi)
/// Elements per rayon task: big enough to amortise scheduling, small enough to split.
const CHUNK: usize = 1 << 14;
const A: f32 = 0.044_715;

/// Forward, element-wise.
pub fn forward(y: &mut [f32], x: &[f32]) {
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(y, x)| {
            for (o, &v) in y.iter_mut().zip(x) {
                let u = S * (v + A * v * v * v);
                *o = 0.5 * v * (1.0 + u.tanh());
            }
        });
}

/// Backward: `dx = dy·y'(x)`, overwriting `dx`.
pub fn backward(dx: &mut [f32], dy: &[f32], x: &[f32]) {
    dx.par_chunks_mut(CHUNK)
        .zip(dy.par_chunks(CHUNK))
        .zip(x.par_chunks(CHUNK))
        .for_each(|((dx, dy), x)| {
            for ((d, &g), &v) in dx.iter_mut().zip(dy).zip(x) {
                let u = S * (v + A * v * v * v);
                let th = u.tanh();
                let sech2 = 1.0 - th * th;
                let du = S * (1.0 + 3.0 * A * v * v);
                *d = g * (0.5 * (1.0 + th) + 0.5 * v * sech2 * du);
            }
        });
}
