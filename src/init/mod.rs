//! Weight initialisation: random orthogonal matrices (QR, SVD, Householder, Cayley) and the
//! `torch.nn.init` toolkit. Everything random takes a seed and is reproducible bit for bit.

pub mod orthogonal;
pub mod rng;

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
}
