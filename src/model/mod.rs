//! Models: the GPT language model with selectable attention, its configuration and presets,
//! and exact parameter/memory/FLOP accounting.

pub mod accounting;
pub mod attention_kind;
pub mod causal_lm;
pub mod checkpoint;
pub mod config;
pub mod eval;
pub mod export_gpt2;
pub mod gpt;
mod gpt_activations;
mod gpt_acts;
mod gpt_backward;
mod gpt_forward;
mod gpt_masked;
mod gpt_rope;
mod gpt_temperature;
pub mod init_draws;
pub mod layout;
pub mod llama;
pub mod params_report;
pub mod seed_claims;
pub mod store;

pub use attention_kind::{AttentionKind, AttentionSpec, AttnWeight, Kernel, Projection};
pub use causal_lm::{CausalLm, GptCache};
pub use checkpoint::{load_model, save_model};
pub use config::{GptConfig, NormPlacement, Position, Temperature};
pub use eval::{EvalOptions, EvalReport, evaluate};
pub use gpt::Gpt;
pub use gpt_activations::Activations;
pub use gpt_masked::IGNORE;
pub use init_draws::InitDraws;
pub use store::{FrozenStore, ParamStore, TensorInfo};

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
