//! GELU in GPT-2's tanh form: `y = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))`
//! (`torch.nn.GELU(approximate="tanh")`), and in the exact form `y = x·Φ(x)`, `Φ` the standard
//! normal CDF (`torch.nn.GELU()`, nanoGPT's), chosen by [`Gelu`].
//!
//! The tanh form is computed as `y = x·σ(2u)` with `u = √(2/π)(x + 0.044715x³)`, since
//! `½(1 + tanh u) = σ(2u)`: one vectorised [`simd::exp`] per element instead of a libm `tanhf`,
//! and no cancellation for large negative `x`. The exact form takes `Φ(x) = 1 − ½erfc(x/√2)`
//! for `x ≥ 0` and `½erfc(|x|/√2)` below, with `erfc(z) ≈ t·P(t)·e^{−z²}`, `t = 1/(1 + pz)`
//! (Abramowitz & Stegun 7.1.26, |error| ≤ 1.5e-7), again one [`simd::exp`] per element, which
//! the backward `Φ(x) + x·φ(x)` reuses (`φ(x) = e^{−x²/2}/√(2π)` and `e^{−z²} = e^{−x²/2}`).

use super::simd::{self, dispatch};
use rayon::prelude::*;

const S: f32 = 0.797_884_6; // sqrt(2/pi)
/// Elements per rayon task: big enough to amortise scheduling, small enough to split.
const CHUNK: usize = 1 << 14;
const A: f32 = 0.044_715;

/// Which GELU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gelu {
    /// GPT-2's tanh approximation (`approximate="tanh"`).
    #[default]
    Tanh,
    /// The exact `x·Φ(x)` (PyTorch's default `nn.GELU()`, nanoGPT's).
    Erf,
}

/// Forward of `form`, element-wise.
pub fn forward_form(form: Gelu, y: &mut [f32], x: &[f32]) {
    match form {
        Gelu::Tanh => forward(y, x),
        Gelu::Erf => y
            .par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .for_each(|(y, x)| erf_forward_kernel(y, x)),
    }
}

/// Backward of `form`: `dx = dy · gelu'(x)` (overwrites `dx`).
pub fn backward_form(form: Gelu, dx: &mut [f32], dy: &[f32], x: &[f32]) {
    match form {
        Gelu::Tanh => backward(dx, dy, x),
        Gelu::Erf => dx
            .par_chunks_mut(CHUNK)
            .zip(dy.par_chunks(CHUNK))
            .zip(x.par_chunks(CHUNK))
            .for_each(|((dx, dy), x)| erf_backward_kernel(dx, dy, x)),
    }
}

/// `(Φ(x), e^{−x²/2})` by Abramowitz & Stegun 7.1.26 (see the module documentation).
#[inline(always)]
// The constants as Abramowitz & Stegun print them (each rounds to the nearest f32).
#[allow(clippy::excessive_precision)]
fn phi_and_gauss(v: f32) -> (f32, f32) {
    const P: f32 = 0.327_591_1;
    const A1: f32 = 0.254_829_592;
    const A2: f32 = -0.284_496_736;
    const A3: f32 = 1.421_413_741;
    const A4: f32 = -1.453_152_027;
    const A5: f32 = 1.061_405_429;
    let z = v.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / z.mul_add(P, 1.0);
    let poly = t * t.mul_add(t.mul_add(t.mul_add(t.mul_add(A5, A4), A3), A2), A1);
    let gauss = simd::exp(-0.5 * v * v);
    let half_erfc = 0.5 * poly * gauss;
    let phi = if v >= 0.0 { 1.0 - half_erfc } else { half_erfc };
    (phi, gauss)
}

dispatch! {
    fn erf_forward_kernel(y: &mut [f32], x: &[f32]) {
        for (o, &v) in y.iter_mut().zip(x) {
            *o = v * phi_and_gauss(v).0;
        }
    }
}

dispatch! {
    // d/dx [x·Φ(x)] = Φ(x) + x·φ(x).
    fn erf_backward_kernel(dx: &mut [f32], dy: &[f32], x: &[f32]) {
        const INV_SQRT_2PI: f32 = 0.398_942_3;
        for ((d, &g), &v) in dx.iter_mut().zip(dy).zip(x) {
            let (phi, gauss) = phi_and_gauss(v);
            *d = g * (v * INV_SQRT_2PI).mul_add(gauss, phi);
        }
    }
}

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

    /// `erf` in f64 from the regularised incomplete gamma function: `erf(z) = P(½, z²)`.
    fn erf64(z: f64) -> f64 {
        z.signum() * crate::stats::gamma_p(0.5, z * z)
    }

    fn gelu_exact64(x: f64) -> f64 {
        0.5 * x * (1.0 + erf64(x / std::f64::consts::SQRT_2))
    }

    #[test]
    fn exact_form_matches_torch_and_its_derivative() {
        // torch.nn.functional.gelu(x) in float64 (torch 2.15), the oracle for the f64 reference.
        for (x, want) in [
            (-6.0, -5.919_525_869_479_969e-9),
            (-3.0, -0.004_049_694_094_890_31),
            (-1.0, -0.158_655_253_931_457_02),
            (-0.5, -0.154_268_769_362_993_44),
            (0.3, 0.185_373_426_656_685_8),
            (1.0, 0.841_344_746_068_543),
            (2.5, 2.484_475_836_685_559_7),
            (5.0, 4.999_998_566_742_141),
        ] {
            assert!((gelu_exact64(x) - want).abs() < 1e-12, "{x}");
        }
        let x: Vec<f32> = (0..20_001).map(|i| (i as f32 - 10_000.0) * 1e-3).collect();
        let mut y = vec![0.0; x.len()];
        forward_form(Gelu::Erf, &mut y, &x);
        let ones = vec![1.0; x.len()];
        let mut d = vec![0.0; x.len()];
        backward_form(Gelu::Erf, &mut d, &ones, &x);
        for ((&xv, &yv), &dv) in x.iter().zip(&y).zip(&d) {
            let want = gelu_exact64(xv as f64);
            assert!(
                (yv as f64 - want).abs() < 5e-7 * (1.0 + want.abs()),
                "{xv}: {yv} vs {want}"
            );
            let h = 1e-5;
            let num = (gelu_exact64(xv as f64 + h) - gelu_exact64(xv as f64 - h)) / (2.0 * h);
            assert!((dv as f64 - num).abs() < 1e-6, "{xv}: {dv} vs {num}");
        }
        // The two forms differ (by up to about 5e-4), so the choice is real.
        let mut t = vec![0.0; x.len()];
        forward_form(Gelu::Tanh, &mut t, &x);
        let gap = t
            .iter()
            .zip(&y)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(gap > 1e-4 && gap < 1e-3, "{gap}");
    }

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
