//! Fan-in and fan-out of a weight shape, PyTorch's rule: `fan_in = size(1) · receptive_field`,
//! `fan_out = size(0) · receptive_field`, `receptive_field = ∏ size(2..)`.

use super::InitError;

/// Checks that every dimension is at least 1.
pub fn check_shape(shape: &[usize]) -> Result<(), InitError> {
    if shape.is_empty() || shape.contains(&0) {
        return Err(InitError::ZeroDim {
            shape: shape.to_vec(),
        });
    }
    // The initialisers compute in f64: the tensor itself must fit before it is allocated.
    crate::io::memory::check_fits(
        crate::io::memory::bytes(shape).and_then(|n| n.checked_mul(8)),
        format_args!("a tensor of shape {shape:?} in f64"),
    )?;
    Ok(())
}

/// `(fan_in, fan_out)` of `shape`; an error for fewer than 2 dimensions, as in PyTorch.
pub fn fans(shape: &[usize]) -> Result<(usize, usize), InitError> {
    check_shape(shape)?;
    if shape.len() < 2 {
        return Err(InitError::TooFewDims {
            what: "fan in and fan out",
            shape: shape.to_vec(),
        });
    }
    let receptive: usize = shape[2..].iter().product();
    Ok((shape[1] * receptive, shape[0] * receptive))
}

/// Which fan Kaiming initialisation preserves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// Preserve the forward variance (`fan_in`).
    FanIn,
    /// Preserve the backward variance (`fan_out`).
    FanOut,
}

impl FanMode {
    /// Parses `fan_in` or `fan_out`.
    pub fn parse(s: &str) -> Result<FanMode, InitError> {
        match s {
            "fan_in" => Ok(FanMode::FanIn),
            "fan_out" => Ok(FanMode::FanOut),
            other => Err(InitError::BadMode(other.to_string())),
        }
    }
}
