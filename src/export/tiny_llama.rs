//! A tiny Llama-family model with seeded random weights and a byte-level tokenizer, written as
//! an F32 GGUF file: a model to try the library, the command line and the examples on without
//! downloading one. Its text is noise; its shapes, tokenizer and file are real, so everything
//! that loads, generates, evaluates, rotates or quantises a GGUF runs on it.

use std::path::Path;

use crate::init::rng::{fill_standard_normal, seeded};
use crate::io::gguf::{GgmlType, Value, keys};
use crate::model::llama::LlamaConfig;
use crate::model::llama::config::Family;
use crate::model::llama::weights::{LayerWeights, LlamaWeights};

/// The tiny model's shape: width 64, 2 layers, 4 query heads of 16 sharing 2 key/value heads,
/// SwiGLU width 128, context 128, and 257 tokens (the 256 bytes and `<|endoftext|>`).
pub fn tiny_llama_config() -> LlamaConfig {
    LlamaConfig {
        vocab_size: 257,
        d_model: 64,
        n_layer: 2,
        n_head: 4,
        n_kv_head: 2,
        d_ff: 128,
        rope_theta: 10000.0,
        rms_eps: 1e-5,
        max_context: 128,
        family: Family::Llama,
    }
}

/// The GPT-2 byte-level alphabet (`bytes_to_unicode`): printable bytes stand for themselves,
/// the others for the code points from 256 on, in byte order.
pub fn byte_alphabet() -> Vec<String> {
    let mut next = 256u32;
    (0u32..256)
        .map(|b| {
            let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
            let c = if printable {
                b
            } else {
                next += 1;
                next - 1
            };
            char::from_u32(c).map(String::from).unwrap_or_default()
        })
        .collect()
}

/// The tiny model's weights: every matrix drawn from `N(0, 0.02²)` (GPT-2's initialisation)
/// from `seed`, every norm weight 1, `lm_head` tied to the embedding.
pub fn tiny_llama_weights(seed: u64) -> LlamaWeights {
    let cfg = tiny_llama_config();
    let mut rng = seeded(seed);
    let mut draw = |n: usize| -> Vec<f32> {
        let mut v = vec![0.0f64; n];
        fill_standard_normal(&mut rng, &mut v);
        v.iter().map(|x| (0.02 * x) as f32).collect()
    };
    let (d, kv, f) = (cfg.d_model, cfg.n_kv_head * cfg.head_dim(), cfg.d_ff);
    let embed = draw(cfg.vocab_size * d);
    let layers = (0..cfg.n_layer)
        .map(|_| LayerWeights {
            attn_norm: vec![1.0; d],
            wq: draw(d * d),
            wk: draw(kv * d),
            wv: draw(kv * d),
            wo: draw(d * d),
            ffn_norm: vec![1.0; d],
            w_gate: draw(f * d),
            w_up: draw(f * d),
            w_down: draw(d * f),
            qkv_bias: None,
        })
        .collect();
    LlamaWeights {
        embed,
        layers,
        final_norm: vec![1.0; d],
        lm_head: None,
        cfg,
    }
}

/// GGUF tokenizer metadata of a byte-level BPE (`gpt2` model, no merges): one token per
/// byte, so any text tokenizes, and `<|endoftext|>` (id 256) as the end of a sequence.
pub fn byte_tokenizer_metadata() -> Vec<(String, Value)> {
    let mut tokens = byte_alphabet();
    tokens.push("<|endoftext|>".into());
    let eos = (tokens.len() - 1) as u32;
    let str_type = Value::Str(String::new()).type_id();
    let i32_type = Value::I32(0).type_id();
    let types = (0..tokens.len())
        .map(|i| Value::I32(if i as u32 == eos { 3 } else { 1 }))
        .collect();
    vec![
        (keys::TOKENIZER_MODEL.into(), Value::Str("gpt2".into())),
        (
            keys::TOKENIZER_TOKENS.into(),
            Value::Array(str_type, tokens.into_iter().map(Value::Str).collect()),
        ),
        (
            keys::TOKENIZER_TOKEN_TYPE.into(),
            Value::Array(i32_type, types),
        ),
        (
            keys::TOKENIZER_MERGES.into(),
            Value::Array(str_type, vec![]),
        ),
        (keys::TOKENIZER_EOS.into(), Value::U32(eos)),
        (keys::TOKENIZER_ADD_BOS.into(), Value::Bool(false)),
    ]
}

/// Writes the tiny model drawn from `seed` ([`tiny_llama_weights`]) with the byte-level
/// tokenizer as an F32 GGUF file at `path` (about 330 KB), atomically.
pub fn write_tiny_llama_gguf(path: &Path, seed: u64) -> crate::Result<()> {
    let w = tiny_llama_weights(seed);
    super::llama::save_gguf(&w, &byte_tokenizer_metadata(), path, GgmlType::F32)
}
