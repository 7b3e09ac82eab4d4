//! A tiny valid Llama GGUF (width 8, 2 heads of 4, 1 KV head, FFN 16, vocabulary 6, one
//! layer, byte-level BPE tokenizer), written with the crate's own writer: the starting point of
//! the bad-file tests and the fuzz test.

use std::path::Path;

use orthoformer::export::tiny_llama::byte_alphabet;
use orthoformer::io::gguf::{GgmlType, TensorOut, Value, write_gguf};

/// Byte-level tokens for "a", "b", "c", " " and one merge "a b".
pub fn meta(d: u32, layers: u32) -> Vec<(String, Value)> {
    let toks = ["a", "b", "c", "Ġ", "ab", "<|endoftext|>"].map(String::from);
    meta_with(d, layers, &toks, &["a b".to_string()])
}

/// Metadata of a tiny model whose vocabulary is `toks` (the last one a control token, the
/// end of text) with `merges`.
pub fn meta_with(d: u32, layers: u32, toks: &[String], merges: &[String]) -> Vec<(String, Value)> {
    let s = |x: &str| Value::Str(x.into());
    let n = toks.len();
    vec![
        ("general.architecture".into(), s("llama")),
        ("llama.block_count".into(), Value::U32(layers)),
        ("llama.embedding_length".into(), Value::U32(d)),
        ("llama.feed_forward_length".into(), Value::U32(16)),
        ("llama.attention.head_count".into(), Value::U32(2)),
        ("llama.attention.head_count_kv".into(), Value::U32(1)),
        ("llama.rope.freq_base".into(), Value::F32(10000.0)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(1e-5),
        ),
        ("llama.context_length".into(), Value::U32(64)),
        ("tokenizer.ggml.model".into(), s("gpt2")),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(8, toks.iter().map(|t| s(t)).collect()),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(
                5,
                vec![Value::I32(1); n - 1]
                    .into_iter()
                    .chain([Value::I32(3)])
                    .collect(),
            ),
        ),
        (
            "tokenizer.ggml.merges".into(),
            Value::Array(8, merges.iter().map(|m| s(m)).collect()),
        ),
    ]
}

/// A valid tiny model: width 8, 2 heads of 4, 1 KV head, FFN 16, vocab 6, one layer.
pub fn write_tiny(path: &Path, skip: Option<&str>) {
    write_tiny_with(path, skip, &meta(8, 1));
}

/// The tiny model with a byte-level vocabulary of `vocab` tokens (at least 257): the 256
/// bytes, filler tokens, and the end of text; it tokenizes any text.
pub fn write_tiny_bytes(path: &Path, vocab: usize) {
    let mut toks = byte_alphabet();
    toks.extend((toks.len()..vocab - 1).map(|i| format!("<filler{i}>")));
    toks.push("<|endoftext|>".into());
    write_tiny_with(path, None, &meta_with(8, 1, &toks, &[]));
}

/// The tiny model's tensors with the vocabulary `meta` describes, `skip` left out.
pub fn write_tiny_with(path: &Path, skip: Option<&str>, meta: &[(String, Value)]) {
    let v = meta
        .iter()
        .find(|(k, _)| k == "tokenizer.ggml.tokens")
        .and_then(|(_, t)| t.as_array())
        .map_or(0, |a| a.len() as u64);
    let (d, f, kv) = (8u64, 16u64, 4u64);
    let fill = |n: u64, k: f32| -> Vec<f32> {
        (0..n)
            .map(|i| ((i as f32 * 0.37 + k).sin()) * 0.5)
            .collect()
    };
    let shapes: Vec<(String, Vec<u64>)> = vec![
        ("token_embd.weight".into(), vec![d, v]),
        ("blk.0.attn_norm.weight".into(), vec![d]),
        ("blk.0.attn_q.weight".into(), vec![d, d]),
        ("blk.0.attn_k.weight".into(), vec![d, kv]),
        ("blk.0.attn_v.weight".into(), vec![d, kv]),
        ("blk.0.attn_output.weight".into(), vec![d, d]),
        ("blk.0.ffn_norm.weight".into(), vec![d]),
        ("blk.0.ffn_gate.weight".into(), vec![d, f]),
        ("blk.0.ffn_up.weight".into(), vec![d, f]),
        ("blk.0.ffn_down.weight".into(), vec![f, d]),
        ("output_norm.weight".into(), vec![d]),
    ];
    let data: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, (_, s))| fill(s.iter().product(), i as f32))
        .collect();
    let ts: Vec<TensorOut> = shapes
        .iter()
        .zip(&data)
        .filter(|((n, _), _)| Some(n.as_str()) != skip)
        .map(|((n, s), x)| TensorOut {
            name: n.clone(),
            dims: s.clone(),
            data: x,
        })
        .collect();
    write_gguf(path, meta, &ts, GgmlType::F32).unwrap();
}
