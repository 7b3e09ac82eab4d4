//! The deterministic `torch.nn.init` functions: constant (ones, zeros), eye and dirac.

use super::InitError;
use super::fan::check_shape;

/// Every entry equal to `val`.
pub fn constant(shape: &[usize], val: f64) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    if !val.is_finite() {
        return Err(InitError::BadParam(format!(
            "`val` {val} is not a finite number"
        )));
    }
    Ok(vec![val; shape.iter().product()])
}

/// The 2-D identity: ones on the main diagonal of a `rows x cols` matrix.
pub fn eye(shape: &[usize]) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    if shape.len() != 2 {
        return Err(InitError::WrongDims {
            what: "eye",
            expected: "exactly 2",
            shape: shape.to_vec(),
        });
    }
    let (r, c) = (shape[0], shape[1]);
    let mut v = vec![0.0; r * c];
    for i in 0..r.min(c) {
        v[i * c + i] = 1.0;
    }
    Ok(v)
}

/// The Dirac delta for a 3-, 4- or 5-D convolution weight `[out, in, k...]`: with `groups`
/// groups of `out / groups` output channels, output channel `g·(out/groups) + d` passes input
/// channel `d` through its kernel's centre (`k / 2` in every spatial dimension), for
/// `d < min(out/groups, in)`; everything else is zero.
pub fn dirac(shape: &[usize], groups: usize) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    if !(3..=5).contains(&shape.len()) {
        return Err(InitError::WrongDims {
            what: "dirac",
            expected: "3, 4 or 5",
            shape: shape.to_vec(),
        });
    }
    if groups == 0 || !shape[0].is_multiple_of(groups) {
        return Err(InitError::BadGroups {
            groups,
            out_channels: shape[0],
        });
    }
    let per = shape[0] / groups;
    let spatial = &shape[2..];
    let ksize: usize = spatial.iter().product();
    // Offset of the centre tap inside one row-major kernel.
    let mut centre = 0;
    for &k in spatial {
        centre = centre * k + k / 2;
    }
    let mut v = vec![0.0; shape.iter().product()];
    for g in 0..groups {
        for d in 0..per.min(shape[1]) {
            let o = g * per + d;
            v[(o * shape[1] + d) * ksize + centre] = 1.0;
        }
    }
    Ok(v)
}
