//! The random `torch.nn.init` functions with PyTorch's semantics: uniform, normal,
//! truncated normal, Xavier, Kaiming, orthogonal (trailing dimensions flattened) and sparse.
//! Every function fills a row-major tensor of `shape` from a seeded generator.

use rand::Rng as _;

use super::InitError;
use super::fan::{FanMode, check_shape, fans};
use super::gain::calculate_gain;
use super::rng::{Rng, fill_standard_normal};
use crate::stats::normal_cdf;

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// `U(lo, hi)` entries.
pub fn uniform(shape: &[usize], lo: f64, hi: f64, rng: &mut Rng) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        return Err(InitError::BadBounds { lo, hi });
    }
    Ok((0..numel(shape))
        .map(|_| lo + (hi - lo) * rng.random::<f64>())
        .collect())
}

/// `N(mean, std²)` entries.
pub fn normal(shape: &[usize], mean: f64, std: f64, rng: &mut Rng) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    check_std(std)?;
    let mut v = vec![0.0; numel(shape)];
    fill_standard_normal(rng, &mut v);
    v.iter_mut().for_each(|x| *x = mean + std * *x);
    Ok(v)
}

fn check_std(std: f64) -> Result<(), InitError> {
    if !std.is_finite() || std < 0.0 {
        return Err(InitError::BadParam(format!(
            "std {std} is not a finite non-negative number"
        )));
    }
    Ok(())
}

/// `N(mean, std²)` conditioned on `[lo, hi]` (absolute bounds, as in PyTorch), by inverting
/// the CDF (`u ~ U(Φ(α), Φ(β))`, `x = mean + std Φ⁻¹(u)`, `α = (lo − mean)/std`) when the
/// interval holds under a quarter of the mass, by rejection otherwise.
pub fn trunc_normal(
    shape: &[usize],
    mean: f64,
    std: f64,
    lo: f64,
    hi: f64,
    rng: &mut Rng,
) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    check_std(std)?;
    if !(lo.is_finite() && hi.is_finite()) || lo >= hi {
        return Err(InitError::BadBounds { lo, hi });
    }
    if std == 0.0 {
        return Ok(vec![mean.clamp(lo, hi); numel(shape)]);
    }
    let (a, b) = ((lo - mean) / std, (hi - mean) / std);
    let (fa, fb) = (normal_cdf(a), normal_cdf(b));
    if fb - fa >= 0.25 {
        // Rejection from the untruncated normal: exact, and at most 4 draws per value on average.
        let mut v = Vec::with_capacity(numel(shape));
        let mut z = [0.0];
        while v.len() < numel(shape) {
            fill_standard_normal(rng, &mut z);
            if (a..=b).contains(&z[0]) {
                v.push((mean + std * z[0]).clamp(lo, hi));
            }
        }
        return Ok(v);
    }
    Ok((0..numel(shape))
        .map(|_| {
            let u = fa + (fb - fa) * rng.random::<f64>();
            // Safeguarded Newton on Φ(x) = u in [a, b]: a Newton step when it stays inside the
            // bracket, a bisection step otherwise; Φ is increasing so the bracket always holds.
            let (mut l, mut h) = (a, b);
            let mut x = 0.5 * (l + h);
            for _ in 0..100 {
                let f = normal_cdf(x) - u;
                if f < 0.0 {
                    l = x
                } else {
                    h = x
                }
                let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
                let nx = x - f / pdf;
                let nx = if nx > l && nx < h { nx } else { 0.5 * (l + h) };
                if (nx - x).abs() <= 1e-15 * (1.0 + x.abs()) || h - l < 1e-15 {
                    x = nx;
                    break;
                }
                x = nx;
            }
            (mean + std * x).clamp(lo, hi)
        })
        .collect())
}

/// Xavier/Glorot uniform: `U(−a, a)`, `a = gain · √(6 / (fan_in + fan_out))`.
pub fn xavier_uniform(shape: &[usize], gain: f64, rng: &mut Rng) -> Result<Vec<f64>, InitError> {
    let (fi, fo) = fans(shape)?;
    check_gain(gain)?;
    let a = 3f64.sqrt() * gain * (2.0 / (fi + fo) as f64).sqrt();
    uniform(shape, -a, a, rng)
}

/// Xavier/Glorot normal: `N(0, std²)`, `std = gain · √(2 / (fan_in + fan_out))`.
pub fn xavier_normal(shape: &[usize], gain: f64, rng: &mut Rng) -> Result<Vec<f64>, InitError> {
    let (fi, fo) = fans(shape)?;
    check_gain(gain)?;
    normal(shape, 0.0, gain * (2.0 / (fi + fo) as f64).sqrt(), rng)
}

fn check_gain(gain: f64) -> Result<(), InitError> {
    if !gain.is_finite() || gain < 0.0 {
        return Err(InitError::BadGain(gain));
    }
    Ok(())
}

/// Kaiming's standard deviation `gain(nonlinearity, a) / √fan`.
pub fn kaiming_std(
    shape: &[usize],
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
) -> Result<f64, InitError> {
    let (fi, fo) = fans(shape)?;
    let fan = match mode {
        FanMode::FanIn => fi,
        FanMode::FanOut => fo,
    };
    Ok(calculate_gain(nonlinearity, Some(a))? / (fan as f64).sqrt())
}

/// Kaiming/He uniform: `U(−b, b)`, `b = √3 · gain / √fan`.
pub fn kaiming_uniform(
    shape: &[usize],
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
    rng: &mut Rng,
) -> Result<Vec<f64>, InitError> {
    let b = 3f64.sqrt() * kaiming_std(shape, a, mode, nonlinearity)?;
    uniform(shape, -b, b, rng)
}

/// Kaiming/He normal: `N(0, (gain / √fan)²)`.
pub fn kaiming_normal(
    shape: &[usize],
    a: f64,
    mode: FanMode,
    nonlinearity: &str,
    rng: &mut Rng,
) -> Result<Vec<f64>, InitError> {
    let std = kaiming_std(shape, a, mode, nonlinearity)?;
    normal(shape, 0.0, std, rng)
}

/// `torch.nn.init.orthogonal_`: the tensor viewed as `size(0) x (numel / size(0))`, filled
/// with a Haar (sign-fixed QR) matrix times `gain`.
pub fn orthogonal(shape: &[usize], gain: f64, seed: u64) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    if shape.len() < 2 {
        return Err(InitError::TooFewDims {
            what: "orthogonal",
            shape: shape.to_vec(),
        });
    }
    let rows = shape[0];
    super::orthogonal::haar_f64(rows, numel(shape) / rows, gain, seed)
}

/// `torch.nn.init.sparse_`: a 2-D `N(0, std²)` matrix in which, in every column,
/// `ceil(sparsity · rows)` entries chosen uniformly at random are zero.
pub fn sparse(
    shape: &[usize],
    sparsity: f64,
    std: f64,
    rng: &mut Rng,
) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    if shape.len() != 2 {
        return Err(InitError::WrongDims {
            what: "sparse",
            expected: "exactly 2",
            shape: shape.to_vec(),
        });
    }
    if !(0.0..=1.0).contains(&sparsity) {
        return Err(InitError::BadSparsity(sparsity));
    }
    let (rows, cols) = (shape[0], shape[1]);
    let zeros = (sparsity * rows as f64).ceil() as usize;
    let mut v = normal(shape, 0.0, std, rng)?;
    let mut idx: Vec<usize> = (0..rows).collect();
    for c in 0..cols {
        // Partial Fisher-Yates: the first `zeros` of a uniform permutation.
        for i in 0..zeros.min(rows) {
            let j = rng.random_range(i..rows);
            idx.swap(i, j);
            v[idx[i] * cols + c] = 0.0;
        }
    }
    Ok(v)
}
