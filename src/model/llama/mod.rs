//! Llama-architecture models (RMSNorm, RoPE, grouped-query attention, SwiGLU, tied
//! embeddings): configuration, weights and inference with a KV cache.
