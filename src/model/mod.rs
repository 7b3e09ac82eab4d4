//! Models, the math only: the GPT language model with selectable attention (`gpt/`: forward,
//! backward, activations, tensor layout, parameter stores, its weights file), its
//! configuration and presets, exact parameter/memory/FLOP accounting, and pretrained
//! Llama-family models (`llama/`). Running them is `infer`; writing them for other tools is
//! `export`.

pub mod accounting;
pub(crate) mod attention_kind;
pub(crate) mod config;
pub mod gpt;
pub mod llama;

pub use attention_kind::{AttentionKind, AttentionSpec, AttnWeight, Kernel, Projection};
pub use config::{GptConfig, NormPlacement, Position, Temperature};
pub use gpt::Gpt;
pub use gpt::activations::Activations;
pub use gpt::file::{load_model, save_model};
pub use gpt::init_draws::InitDraws;
pub use gpt::masked::IGNORE;
pub use gpt::store::{FrozenStore, ParamStore, TensorInfo};

/// A model configuration or checkpoint that does not make sense.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The configuration is invalid; the message says which field and why.
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// A batch handed to the model does not fit it (lengths, token ids, sequence length).
    #[error("bad batch: {0}")]
    Batch(String),
    /// A checkpoint is missing something, or its frozen weights do not match their hash.
    #[error("bad checkpoint: {0}")]
    Checkpoint(String),
    /// An evaluation that cannot run: its windows do not fit the model, or the text is too short.
    #[error("invalid evaluation: {0}")]
    Eval(String),
}
