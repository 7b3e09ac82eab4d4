//! GGUF metadata keys and tensor names used by Llama-architecture files (llama.cpp naming).

/// The file magic, `GGUF` in ASCII.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// Default tensor-data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// `general.architecture` (for example `llama`).
pub const ARCHITECTURE: &str = "general.architecture";
/// `general.alignment` (u32).
pub const ALIGNMENT: &str = "general.alignment";
/// `general.file_type` (the dominant ggml type).
pub const FILE_TYPE: &str = "general.file_type";

/// `general.quantization_version`: version of ggml's quantisation formats (2 today).
pub const QUANTIZATION_VERSION: &str = "general.quantization_version";
/// `tokenizer.chat_template`: the Jinja chat template of an instruction-tuned model.
pub const CHAT_TEMPLATE: &str = "tokenizer.chat_template";
/// `tokenizer.ggml.unknown_token_id`.
pub const TOKENIZER_UNK: &str = "tokenizer.ggml.unknown_token_id";
/// `tokenizer.ggml.padding_token_id`.
pub const TOKENIZER_PAD: &str = "tokenizer.ggml.padding_token_id";
/// `tokenizer.ggml.add_bos_token`: whether the model expects a BOS token first.
pub const TOKENIZER_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";

/// `{arch}.block_count`: number of layers.
pub const BLOCK_COUNT: &str = "block_count";
/// `{arch}.embedding_length`: model width.
pub const EMBEDDING_LENGTH: &str = "embedding_length";
/// `{arch}.feed_forward_length`: FFN width.
pub const FEED_FORWARD_LENGTH: &str = "feed_forward_length";
/// `{arch}.attention.head_count`.
pub const HEAD_COUNT: &str = "attention.head_count";
/// `{arch}.attention.head_count_kv`.
pub const HEAD_COUNT_KV: &str = "attention.head_count_kv";
/// `{arch}.rope.freq_base`.
pub const ROPE_FREQ_BASE: &str = "rope.freq_base";
/// `{arch}.attention.layer_norm_rms_epsilon`.
pub const RMS_EPS: &str = "attention.layer_norm_rms_epsilon";
/// `{arch}.context_length`.
pub const CONTEXT_LENGTH: &str = "context_length";
/// `{arch}.rope.dimension_count`.
pub const ROPE_DIMENSION_COUNT: &str = "rope.dimension_count";
/// `{arch}.vocab_size`.
pub const VOCAB_SIZE: &str = "vocab_size";

/// `tokenizer.ggml.model` (`gpt2` for byte-level BPE).
pub const TOKENIZER_MODEL: &str = "tokenizer.ggml.model";
/// `tokenizer.ggml.pre`: the pre-tokenizer flavour (`smollm`, `gpt2`, ...).
pub const TOKENIZER_PRE: &str = "tokenizer.ggml.pre";
/// `tokenizer.ggml.tokens`: the vocabulary, in id order.
pub const TOKENIZER_TOKENS: &str = "tokenizer.ggml.tokens";
/// `tokenizer.ggml.token_type`: 1 normal, 3 control, ...
pub const TOKENIZER_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
/// `tokenizer.ggml.merges`: BPE merges as `"a b"` strings, by priority.
pub const TOKENIZER_MERGES: &str = "tokenizer.ggml.merges";
/// `tokenizer.ggml.bos_token_id`.
pub const TOKENIZER_BOS: &str = "tokenizer.ggml.bos_token_id";
/// `tokenizer.ggml.eos_token_id`.
pub const TOKENIZER_EOS: &str = "tokenizer.ggml.eos_token_id";

/// Token embedding (`V x C`).
pub const TOKEN_EMBD: &str = "token_embd.weight";
/// Final RMSNorm weight.
pub const OUTPUT_NORM: &str = "output_norm.weight";
/// Output projection (absent when tied to the embedding).
pub const OUTPUT: &str = "output.weight";

/// Name of a per-layer tensor, e.g. `blk.3.attn_q.weight`.
pub fn block(layer: usize, what: &str) -> String {
    format!("blk.{layer}.{what}.weight")
}

/// Name of bias tensor `what` of block `layer`, e.g. `blk.0.attn_q.bias` (Qwen2's q/k/v).
pub fn block_bias(layer: usize, what: &str) -> String {
    format!("blk.{layer}.{what}.bias")
}
