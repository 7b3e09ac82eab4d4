//! The library's error type: one enum at the boundary, one variant per subsystem, each
//! wrapping that subsystem's own typed error. The binary adds context with `anyhow`.

use std::path::PathBuf;

/// Any error the library returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    // The cause is printed by the error chain, so the message names only the path.
    #[error("{}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Bad arguments to an initialiser (shape, gain, method).
    #[error(transparent)]
    Init(#[from] crate::init::InitError),
    /// A file format problem (npy, safetensors, GGUF).
    #[error(transparent)]
    Format(#[from] crate::io::FormatError),
    /// A model configuration or checkpoint does not make sense.
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    /// A dataset or tokenizer problem.
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
    /// Training stopped (non-finite loss, interrupted, bad options).
    #[error(transparent)]
    Train(#[from] crate::train::TrainError),
    /// Rotation, quantisation or alignment of a pretrained model failed.
    #[error(transparent)]
    Rotate(#[from] crate::rotate::RotateError),
    /// The MQAR benchmark harness (bad task shape, plot failure).
    #[error(transparent)]
    Mqar(#[from] crate::analysis::mqar::MqarError),
    /// A theory measurement (shape mismatch, plot failure).
    #[error(transparent)]
    Theory(#[from] crate::analysis::theory::TheoryError),
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// `Result` with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
