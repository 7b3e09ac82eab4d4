//! Weight initialisation: random orthogonal matrices (QR, SVD, Householder, Cayley) and the
//! `torch.nn.init` toolkit. Everything random takes a seed and is reproducible bit for bit.

pub mod fan;
pub mod fixed;
pub mod frozen_draw;
pub mod gain;
mod gaussian;
pub mod method;
pub mod mimetic;
pub mod options;
pub mod orthogonal;
pub mod random;
pub mod rng;
pub mod run;
pub mod zero;

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
    /// A shape has too few dimensions for the operation.
    #[error("{what} needs a tensor with at least 2 dimensions, got shape {shape:?}")]
    TooFewDims {
        /// What was asked for.
        what: &'static str,
        /// The shape given.
        shape: Vec<usize>,
    },
    /// A shape has the wrong number of dimensions for the operation.
    #[error("{what} needs a tensor with {expected} dimensions, got shape {shape:?}")]
    WrongDims {
        /// What was asked for.
        what: &'static str,
        /// The accepted dimension counts, in words.
        expected: &'static str,
        /// The shape given.
        shape: Vec<usize>,
    },
    /// The nonlinearity is not one `calculate_gain` knows.
    #[error(
        "unknown nonlinearity {0:?}: use linear, conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d, sigmoid, tanh, relu, leaky_relu or selu"
    )]
    UnknownNonlinearity(String),
    /// Kaiming's mode is not fan_in or fan_out.
    #[error("unknown mode {0:?}: use fan_in or fan_out")]
    BadMode(String),
    /// The sparsity is outside [0, 1].
    #[error("sparsity {0} is outside [0, 1]")]
    BadSparsity(f64),
    /// Dirac's groups do not divide the output channels.
    #[error("groups {groups} must be at least 1 and divide the {out_channels} output channels")]
    BadGroups {
        /// The groups asked for.
        groups: usize,
        /// The output channels (`shape[0]`).
        out_channels: usize,
    },
    /// Bounds that are not finite or not ordered.
    #[error("bounds lo {lo} and hi {hi} must be finite with lo < hi")]
    BadBounds {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
    /// A parameter is NaN or infinite.
    #[error("{name} {value} is not a finite number")]
    NonFiniteParam {
        /// The parameter's flag name.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// The drawn values overflow (parameters finite but too large, e.g. `std 1e308`).
    #[error(
        "{method} with these parameters gives values that are not finite ({count} of {total}): use smaller parameters"
    )]
    NonFiniteResult {
        /// The method.
        method: String,
        /// How many values are NaN or infinite.
        count: usize,
        /// How many were drawn.
        total: usize,
    },
    /// Any other bad parameter, in words.
    #[error("{0}")]
    BadParam(String),
    /// The matrices asked for do not fit this machine's memory.
    #[error(transparent)]
    Memory(#[from] crate::io::memory::MemoryError),
}
