//! A GGUF writer for tests that need tensors in types the crate does not write (the K-quants,
//! BF16) or architectures its exporter refuses (qwen2): metadata and raw tensor bytes as given.

use std::path::Path;

use orthoformer::io::gguf::{GgmlType, Value};

/// One tensor: name, dims (innermost first), type and its stored bytes.
pub struct RawTensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    pub bytes: Vec<u8>,
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

fn put_value(b: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U32(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => b.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => b.push(u8::from(*x)),
        Value::Str(s) => put_str(b, s),
        Value::Array(t, items) => {
            b.extend_from_slice(&t.to_le_bytes());
            b.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for i in items {
                put_value(b, i);
            }
        }
        other => panic!("raw_gguf: value {other:?} not needed by the tests"),
    }
}

/// Writes a GGUF v3 file (alignment 32).
pub fn write(path: &Path, meta: &[(String, Value)], tensors: &[RawTensor]) {
    const ALIGN: u64 = 32;
    let pad = |n: u64| n.div_ceil(ALIGN) * ALIGN;
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    for (k, v) in meta {
        put_str(&mut b, k);
        b.extend_from_slice(&v.type_id().to_le_bytes());
        put_value(&mut b, v);
    }
    let mut offset = 0u64;
    for t in tensors {
        put_str(&mut b, &t.name);
        b.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&t.ty.id().to_le_bytes());
        b.extend_from_slice(&offset.to_le_bytes());
        offset = pad(offset + t.bytes.len() as u64);
    }
    b.resize(pad(b.len() as u64) as usize, 0);
    for t in tensors {
        b.extend_from_slice(&t.bytes);
        b.resize(pad(b.len() as u64) as usize, 0);
    }
    std::fs::write(path, b).unwrap();
}

/// The metadata of a model of architecture `arch` with the given shape and no tokenizer
/// (the engine reads the vocabulary size from `{arch}.vocab_size`).
pub fn meta(
    arch: &str,
    d: u32,
    f: u32,
    heads: u32,
    kv: u32,
    layers: u32,
    vocab: u32,
) -> Vec<(String, Value)> {
    let k = |s: &str| format!("{arch}.{s}");
    vec![
        ("general.architecture".into(), Value::Str(arch.into())),
        (k("block_count"), Value::U32(layers)),
        (k("embedding_length"), Value::U32(d)),
        (k("feed_forward_length"), Value::U32(f)),
        (k("attention.head_count"), Value::U32(heads)),
        (k("attention.head_count_kv"), Value::U32(kv)),
        (k("rope.freq_base"), Value::F32(10000.0)),
        (k("attention.layer_norm_rms_epsilon"), Value::F32(1e-5)),
        (k("context_length"), Value::U32(64)),
        (k("vocab_size"), Value::U32(vocab)),
    ]
}
