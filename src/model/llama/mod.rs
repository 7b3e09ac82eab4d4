//! Llama-architecture models (RMSNorm, RoPE, grouped-query attention, SwiGLU, tied
//! embeddings): configuration, weights, tokenizer, and inference with a KV cache, loaded from
//! GGUF or from Hugging Face `model.safetensors` + `config.json`.

pub mod cache;
pub mod config;
pub mod forward;
pub mod hessian;
pub mod kv_quant;
pub mod kv_store;
pub mod linear;
pub mod load;
pub mod online;
pub mod quant;
pub mod special_tokens;
pub mod supported;
pub mod tokenizer;
pub mod tokenizer_spm;
pub mod weights;

pub use cache::{KvCache, KvDtype};
pub use config::LlamaConfig;
pub use forward::Llama;
pub use linear::{Layer, Linear, ModelWeights};
pub use load::{LoadedEngine, LoadedModel, load_engine, load_model};
pub use online::RuntimeQuant;
pub use special_tokens::SpecialTokens;
pub use weights::{LayerWeights, LlamaWeights};
