//! Text data: loading and validating corpora, the one tokenizer type (character, byte-level
//! BPE, any Hugging Face `tokenizer.json`, ids), the train/validation split and seeded batch
//! sampling.
//!
//! The flow is `corpus::load` (a UTF-8 text, checked) -> `Tokenizer::train` or
//! `Tokenizer::from_json` -> `encode` -> `Split::new` (first 90% train, last 10% validation)
//! -> `BatchSampler::next_batch` (seeded random windows).

pub(crate) mod batch;
pub mod bpe;
pub mod char_level;
pub mod corpus;
pub mod hf;
pub mod hf_tokenizer;
pub mod ids;
pub mod numpy_rng;
pub(crate) mod split;
pub mod token_files;
pub(crate) mod tokenizer;

pub use batch::BatchSampler;
pub use corpus::Corpus;
pub use split::Split;
pub use tokenizer::{Tokenizer, TokenizerKind};

/// A dataset or tokenizer problem.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The data is unusable; the message says why and what to do.
    #[error("{0}")]
    Invalid(String),
}

/// Shorthand for an [`DataError::Invalid`] wrapped in the crate error.
pub(crate) fn invalid(msg: impl Into<String>) -> crate::Error {
    crate::Error::Data(DataError::Invalid(msg.into()))
}
