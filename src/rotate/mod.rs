//! Computational invariance of pretrained RMSNorm models: fold norms, rotate the residual
//! stream by an orthogonal matrix, and align two models (hidden states or weights). Quantisation
//! of the rotated model is `crate::quant`'s.

pub mod align;
pub(crate) mod apply;
pub(crate) mod assignment;
pub(crate) mod check;
pub(crate) mod fold;
pub mod heads;
pub(crate) mod job;
pub mod memory_need;
pub mod options;
pub mod out_path;
pub(crate) mod outputs;
pub use crate::nn::hadamard;
pub mod procrustes;
pub(crate) mod rotation;
pub mod set;
pub mod staging;
pub mod weight_align;
pub mod weight_fit;

pub use apply::{rotate_down_inputs, rotate_weights};
pub use fold::fold_norms;
pub use job::{RotateJob, RotateReport, run};
pub use rotation::{Rotation, RotationKind};

/// Rotation or alignment failed.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    /// A bad option or model; the message says which.
    #[error("{0}")]
    Invalid(String),
}
