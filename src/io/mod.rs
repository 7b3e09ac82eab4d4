//! File formats and safe writing: atomic file creation (temp file + rename), sets of files
//! replaced all at once, plots, the formats the project reads and writes (npy, a
//! deterministic safetensors writer, GGUF), and the memory check made before large allocations.

pub(crate) mod atomic;
pub mod figure;
pub mod file_set;
pub mod finite;
pub mod folder_kind;
pub mod gguf;
pub(crate) mod guard;
pub mod matrix_file;
pub(crate) mod memory;
pub mod npy;
pub mod rss;
pub mod safe_file;
pub mod safetensors_shards;
pub(crate) mod safetensors_writer;
pub mod table;
pub(crate) mod tokenizer_json;
pub(crate) mod tokenizer_limits;

pub use atomic::{write_atomic, write_atomic_bytes};

/// A malformed or unsupported file.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The output path has an extension the writer does not know.
    #[error("unknown output extension {ext:?} for {path}: use one of {expected}")]
    UnknownExtension {
        /// The file that was asked for.
        path: String,
        /// Its extension (empty when it has none).
        ext: String,
        /// The extensions that are supported.
        expected: &'static str,
    },
    /// A file's content is not what its format requires.
    #[error("{path}: {what}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong, in words.
        what: String,
    },
}
