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
    /// A request too large for this machine's memory, or whose size overflows.
    #[error(transparent)]
    Memory(#[from] crate::io::memory::MemoryError),
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

/// `err` and its causes on one line, `"a: b: c"`, for messages that keep only text (an I/O
/// error's message names the path and leaves the operating system's reason to its cause).
/// Whitespace runs, newlines included, become one space.
pub fn one_line(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    let mut cause = Some(err);
    while let Some(e) = cause {
        let text = e
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !text.is_empty() && !line.ends_with(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        cause = e.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_keeps_the_cause() {
        let e = Error::io("x.svg", std::io::Error::other("No space left\non device"));
        assert_eq!(one_line(&e), "x.svg: No space left on device");
    }
}
