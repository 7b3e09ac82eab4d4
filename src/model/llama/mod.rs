//! Llama-architecture models (RMSNorm, RoPE, grouped-query attention, SwiGLU, tied
//! embeddings): configuration, weights, tokenizer, and inference with a KV cache, loaded from
//! GGUF or from Hugging Face `model.safetensors` + `config.json`.

pub(crate) mod batch;
pub(crate) mod cache;
pub mod config;
pub(crate) mod fields;
pub(crate) mod forward;
pub mod gguf_vocab;
pub mod gguf_vocab_check;
pub(crate) mod hooks;
pub mod kv_quant;
pub(crate) mod kv_store;
pub(crate) mod layer_step;
pub mod layer_tensor;
pub(crate) mod linear;
pub(crate) mod load;
pub mod online;
pub(crate) mod segment;
pub(crate) mod special_tokens;
pub(crate) mod supported;
pub mod tap;
pub(crate) mod tensor_names;
pub mod tokenizer;
pub(crate) mod tokenizer_spm;
pub mod weights;

pub use cache::{KvCache, KvDtype};
pub use config::LlamaConfig;
pub use forward::Llama;
pub use layer_tensor::LayerTensor;
pub use linear::{Layer, Linear, ModelWeights};
pub use load::{LoadedEngine, LoadedModel, load_engine, load_model};
pub use online::RuntimeQuant;
pub use special_tokens::SpecialTokens;
pub use weights::{LayerWeights, LlamaWeights};
