//! Models, the math only: the GPT language model with selectable attention (`gpt/`: forward,
//! backward, activations, tensor layout, parameter stores, its weights file), its
//! configuration and presets, exact parameter/memory/FLOP accounting, and pretrained
//! Llama-family models (`llama/`). Running them is `infer`; writing them for other tools is
//! `export`.

pub mod accounting;
pub(crate) mod attention_kind;
pub(crate) mod config;
pub mod frozen_layers;
pub mod gpt;
pub mod llama;

pub use crate::init::frozen_draw::FrozenDraw;
pub use attention_kind::{AttentionKind, AttentionSpec, AttnWeight, Kernel, Projection};
pub use config::{GptConfig, NormPlacement, Position, Temperature};
pub use frozen_layers::LayerSelect;
pub use gpt::Gpt;
pub use gpt::activations::Activations;
pub use gpt::file::{load_model, save_model};
pub use gpt::init_draws::InitDraws;
pub use gpt::masked::IGNORE;
pub use gpt::store::{FrozenStore, ParamStore, TensorInfo};

/// A model configuration or checkpoint that does not make sense.
///
/// Each message says its kind once: a message that quotes another error of the same kind (a
/// loader naming the file around a configuration error) drops the inner prefix, so nothing
/// reads "invalid model configuration: m: invalid model configuration: ...".
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The configuration is invalid; the message says which field and why.
    #[error("{}{}", CONFIG, once(CONFIG, .0))]
    Config(String),
    /// A batch handed to the model does not fit it (lengths, token ids, sequence length).
    #[error("{}{}", BATCH, once(BATCH, .0))]
    Batch(String),
    /// A checkpoint is missing something, or its frozen weights do not match their hash.
    #[error("{}{}", CHECKPOINT, once(CHECKPOINT, .0))]
    Checkpoint(String),
    /// An evaluation that cannot run: its windows do not fit the model, or the text is too short.
    #[error("{}{}", EVAL, once(EVAL, .0))]
    Eval(String),
}

const CONFIG: &str = "invalid model configuration: ";
const BATCH: &str = "bad batch: ";
const CHECKPOINT: &str = "bad checkpoint: ";
const EVAL: &str = "invalid evaluation: ";

/// `msg` without the occurrences of `prefix` it quotes from a wrapped error of the same kind.
fn once<'a>(prefix: &str, msg: &'a str) -> std::borrow::Cow<'a, str> {
    if msg.contains(prefix) {
        msg.replace(prefix, "").into()
    } else {
        msg.into()
    }
}
