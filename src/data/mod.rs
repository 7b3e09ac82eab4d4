//! Text data: loading and validating corpora, tokenizers (character and byte-level BPE),
//! the train/validation split and seeded batch sampling.

/// A dataset or tokenizer problem.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The data is unusable; the message says why and what to do.
    #[error("{0}")]
    Invalid(String),
}
