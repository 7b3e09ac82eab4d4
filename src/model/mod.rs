//! Models: the GPT language model with selectable attention, its configuration and presets,
//! and exact parameter/memory/FLOP accounting.

pub mod llama;

/// A model configuration or checkpoint that does not make sense.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The configuration is invalid; the message says which field and why.
    #[error("invalid model configuration: {0}")]
    Config(String),
}
