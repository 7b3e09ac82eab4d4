//! Computational invariance of pretrained RMSNorm models: fold norms, rotate the residual
//! stream by an orthogonal matrix, quantise, and align hidden-state spaces.

/// Rotation, quantisation or alignment failed.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    /// A bad option or model; the message says which.
    #[error("{0}")]
    Invalid(String),
}
