//! Every bad model file is a clear one-line error with exit status 2, never a panic or a huge
//! allocation: truncated GGUF, wrong magic, unsupported version or tensor type, a header that
//! claims more data than the file holds, absurd counts, missing tensors, metadata or a
//! `config.json` that disagrees with the weights. A tiny valid Llama GGUF is built here with
//! the crate's own writer, then damaged.

use std::path::{Path, PathBuf};

use crate::models as common;

use common::tiny_llama::{meta, write_tiny, write_tiny_with};
use orthoformer::io::gguf::{GgmlType, GgufFile, TensorOut, Value, write_gguf};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("orthoformer-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Runs `generate --model path` and returns (exit code, stderr).
fn generate(path: &Path) -> (i32, String) {
    let out = crate::common::bin()
        .args(["generate", "--model"])
        .arg(path)
        .args([
            "--prompt",
            "ab c",
            "--max-new-tokens",
            "3",
            "--temperature",
            "0",
        ])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn expect_error(path: &Path, needle: &str) {
    let (code, err) = generate(path);
    assert_eq!(code, 2, "{}: exit {code}, stderr {err}", path.display());
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "expected {needle:?} in {err}");
}

fn patched(name: &str, f: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    // One source file per case: tests run in parallel threads of one process, and two
    // atomic writes of one path from one process share their temporary file.
    let good = tmp(&format!("good-for-{name}"));
    write_tiny(&good, None);
    let mut b = std::fs::read(&good).unwrap();
    f(&mut b);
    let p = tmp(name);
    std::fs::write(&p, b).unwrap();
    p
}

/// Offset of the first tensor's type field (after its name, rank and dims).
fn first_tensor_type_offset(b: &[u8]) -> usize {
    let g = GgufFile::parse(Path::new("x"), b.to_vec()).unwrap();
    let name = &g.tensors[0].name;
    let pos = b
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .unwrap();
    pos + name.len() + 4 + 8 * g.tensors[0].dims.len()
}

#[test]
fn tiny_valid_model_runs() {
    let p = tmp("ok.gguf");
    write_tiny(&p, None);
    let (code, err) = generate(&p);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn damaged_files_are_clear_errors() {
    expect_error(&patched("magic.gguf", |b| b[0] = b'X'), "not a GGUF file");
    expect_error(
        &patched("version.gguf", |b| b[4] = 9),
        "version 9 is not supported",
    );
    expect_error(
        &patched("trunc_header.gguf", |b| b.truncate(40)),
        "truncated",
    );
    expect_error(
        &patched("trunc_data.gguf", |b| b.truncate(b.len() - 100)),
        "claims bytes",
    );
    expect_error(&patched("empty.gguf", |b| b.clear()), "truncated");
    // A tensor count of 2^60: rejected before any allocation.
    expect_error(
        &patched("count.gguf", |b| {
            b[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes())
        }),
        "tensor count",
    );
    expect_error(
        &patched("kvcount.gguf", |b| {
            b[16..24].copy_from_slice(&u64::MAX.to_le_bytes())
        }),
        "metadata count",
    );
    expect_error(
        &patched("qtype.gguf", |b| {
            let o = first_tensor_type_offset(b);
            b[o..o + 4].copy_from_slice(&11u32.to_le_bytes());
        }),
        "Q3_K (id 11) is not supported",
    );
    // A supported super-block type on a row of 8 weights (blocks are 256).
    expect_error(
        &patched("kblock.gguf", |b| {
            let o = first_tensor_type_offset(b);
            b[o..o + 4].copy_from_slice(&12u32.to_le_bytes());
        }),
        "not a whole number of Q4_K blocks",
    );
    expect_error(
        &patched("offset.gguf", |b| {
            let o = first_tensor_type_offset(b) + 4;
            b[o..o + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        }),
        "claims bytes",
    );
    // A huge string length inside the metadata.
    expect_error(
        &patched("strlen.gguf", |b| {
            b[24..32].copy_from_slice(&(1u64 << 50).to_le_bytes())
        }),
        "metadata key",
    );
}

#[test]
fn missing_tensor_and_disagreeing_config_are_errors() {
    let p = tmp("missing.gguf");
    write_tiny(&p, Some("blk.0.ffn_up.weight"));
    expect_error(&p, "tensor blk.0.ffn_up.weight is missing");

    // Metadata says width 16 but the tensors are width 8.
    let good = tmp("good2.gguf");
    write_tiny(&good, None);
    let g = GgufFile::open(&good).unwrap();
    let bad = tmp("width.gguf");
    let mut m = g.metadata.clone();
    for (k, v) in &mut m {
        if k == "llama.embedding_length" {
            *v = Value::U32(16);
        }
    }
    let names: Vec<String> = g.tensors.iter().map(|t| t.name.clone()).collect();
    let data: Vec<Vec<f32>> = g
        .tensors
        .iter()
        .map(|t| g.tensor_f32(&t.name, &t.dims).unwrap())
        .collect();
    let ts: Vec<TensorOut> = g
        .tensors
        .iter()
        .zip(&names)
        .zip(&data)
        .map(|((t, n), d)| TensorOut {
            name: n.clone(),
            dims: t.dims.clone(),
            data: d,
        })
        .collect();
    write_gguf(&bad, &m, &ts, GgmlType::F32).unwrap();
    expect_error(&bad, "the configuration needs");

    // A Hugging Face folder whose config.json disagrees with model.safetensors.
    let loaded = orthoformer::model::llama::load_model(&good).unwrap();
    let dir = tmp("hf");
    orthoformer::export::llama::save_hf_folder(
        &loaded.weights,
        &loaded.tokenizer,
        &loaded.special,
        &dir,
    )
    .unwrap();
    assert_eq!(generate(&dir).0, 0, "the folder itself is valid");
    let cfg = std::fs::read_to_string(dir.join("config.json")).unwrap();
    std::fs::write(
        dir.join("config.json"),
        cfg.replace("\"intermediate_size\": 16", "\"intermediate_size\": 32"),
    )
    .unwrap();
    expect_error(&dir, "config.json implies");
    std::fs::write(dir.join("config.json"), "{not json").unwrap();
    expect_error(&dir, "config.json");
    std::fs::write(
        dir.join("model.safetensors"),
        b"\x10\x00\x00\x00\x00\x00\x00\x00{}",
    )
    .unwrap();
    std::fs::write(dir.join("config.json"), cfg).unwrap();
    expect_error(&dir, "model.safetensors");
    expect_error(&tmp("does-not-exist.gguf"), "does-not-exist.gguf");
}

/// The checks llama.cpp makes beyond bounds. A key or tensor name twice, a tensor
/// offset that is not a multiple of the alignment, two tensors sharing bytes: each a
/// one-line error naming what is wrong.
#[test]
fn duplicates_misalignment_and_overlap_are_errors() {
    let mut m = meta(8, 1);
    m.push(("llama.block_count".into(), Value::U32(1)));
    let dup_key = tmp("dup-key.gguf");
    write_tiny_with(&dup_key, None, &m);
    expect_error(&dup_key, "metadata key llama.block_count appears twice");

    // attn_v renamed attn_k in the tensor directory (same length, so the layout holds).
    expect_error(
        &patched("dup-tensor.gguf", |b| {
            let v = b"blk.0.attn_v.weight";
            let at = b.windows(v.len()).position(|w| w == v).unwrap();
            b[at..at + v.len()].copy_from_slice(b"blk.0.attn_k.weight");
        }),
        "tensor blk.0.attn_k.weight appears twice",
    );
    // The first tensor's offset moved by 4 bytes, off the 32-byte grid.
    expect_error(
        &patched("misaligned.gguf", |b| {
            let o = first_tensor_type_offset(b) + 4;
            b[o..o + 8].copy_from_slice(&4u64.to_le_bytes());
        }),
        "data offset 4 is not a multiple of the alignment 32",
    );
    // The first tensor moved onto the second one's bytes.
    expect_error(
        &patched("overlap.gguf", |b| {
            let second = GgufFile::parse(Path::new("x"), b.to_vec()).unwrap().tensors[1].offset;
            let o = first_tensor_type_offset(b) + 4;
            b[o..o + 8].copy_from_slice(&second.to_le_bytes());
        }),
        "overlap in the data section",
    );
}
