//! Weight initialisation: random orthogonal matrices (QR, SVD, Householder, Cayley) and the
//! `torch.nn.init` toolkit. Everything random takes a seed and is reproducible bit for bit.

pub mod orthogonal;
pub mod rng;
pub mod stats;

/// Bad arguments to an initialiser.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A dimension is zero.
    #[error("shape {shape:?} has a zero dimension: every dimension must be at least 1")]
    ZeroDim {
        /// The shape that was asked for.
        shape: Vec<usize>,
    },
    /// The gain is NaN, infinite or negative.
    #[error("gain {0} is not a finite non-negative number")]
    BadGain(f64),
    /// A factorisation failed to converge (should not happen on Gaussian input).
    #[error("numerical failure: {0}")]
    Numerical(String),
    /// The method name is not one of the known ones.
    #[error("unknown method {0:?}: run `orthoformer init --list` to see every method")]
    UnknownMethod(String),
}
