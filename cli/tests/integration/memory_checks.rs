//! Memory is checked before expansion: a model too large for the memory budget is
//! refused before a weight is expanded to f32, a SentencePiece vocabulary whose merges would
//! take gigabytes is refused before one is built, and user-given counts are capped before a
//! list of that length is made. Each refusal is one line with exit status 2, never an abort.
//!
//! The budget is lowered with `ulimit -v` or `ORTHOFORMER_MEMORY_LIMIT` so that no test needs
//! (or, were the check missing, would take) the memory it describes.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::{BIN, Scratch, run, stderr};
use crate::models::tiny_llama::write_tiny_with;
use orthoformer::export::tiny_llama::write_tiny_llama_gguf;
use orthoformer::io::gguf::{GgmlType, Value};

fn refused(o: &Output, want: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "exit {:?}: {e}", o.status);
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    for w in want {
        assert!(e.contains(w), "{w:?} in {e}");
    }
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// A GGUF of Llama-2-7B's shapes in Q4_0 (3.8 GB) whose data is a hole: the header is
/// written and the file extended, so it takes a few kilobytes of disk.
fn sparse_7b(path: &Path) {
    let (v, c, f, layers) = (32000u64, 4096u64, 11008u64, 32u32);
    let meta: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::Str("llama".into())),
        ("llama.block_count", Value::U32(layers)),
        ("llama.embedding_length", Value::U32(c as u32)),
        ("llama.feed_forward_length", Value::U32(f as u32)),
        ("llama.attention.head_count", Value::U32(32)),
        ("llama.attention.head_count_kv", Value::U32(32)),
        ("llama.context_length", Value::U32(4096)),
        ("llama.vocab_size", Value::U32(v as u32)),
        ("tokenizer.ggml.model", Value::Str("gpt2".into())),
    ];
    let mut tensors: Vec<(String, Vec<u64>, GgmlType)> = vec![
        ("token_embd.weight".into(), vec![c, v], GgmlType::Q4_0),
        ("output_norm.weight".into(), vec![c], GgmlType::F32),
        ("output.weight".into(), vec![c, v], GgmlType::Q4_0),
    ];
    for l in 0..layers {
        let b = |s: &str| format!("blk.{l}.{s}.weight");
        tensors.push((b("attn_norm"), vec![c], GgmlType::F32));
        tensors.push((b("ffn_norm"), vec![c], GgmlType::F32));
        for s in ["attn_q", "attn_k", "attn_v", "attn_output"] {
            tensors.push((b(s), vec![c, c], GgmlType::Q4_0));
        }
        tensors.push((b("ffn_gate"), vec![c, f], GgmlType::Q4_0));
        tensors.push((b("ffn_up"), vec![c, f], GgmlType::Q4_0));
        tensors.push((b("ffn_down"), vec![f, c], GgmlType::Q4_0));
    }
    let pad = |n: u64| n.div_ceil(32) * 32;
    let mut h = b"GGUF".to_vec();
    h.extend_from_slice(&3u32.to_le_bytes());
    h.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    h.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    for (k, val) in &meta {
        put_str(&mut h, k);
        h.extend_from_slice(&val.type_id().to_le_bytes());
        match val {
            Value::U32(x) => h.extend_from_slice(&x.to_le_bytes()),
            Value::Str(s) => put_str(&mut h, s),
            _ => unreachable!("only u32 and strings above"),
        }
    }
    let mut offset = 0u64;
    for (name, dims, ty) in &tensors {
        put_str(&mut h, name);
        h.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            h.extend_from_slice(&d.to_le_bytes());
        }
        h.extend_from_slice(&ty.id().to_le_bytes());
        h.extend_from_slice(&offset.to_le_bytes());
        let n: u64 = dims.iter().product();
        offset = pad(offset + ty.byte_size(n).unwrap());
    }
    h.resize(pad(h.len() as u64) as usize, 0);
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(&h).unwrap();
    file.set_len(h.len() as u64 + offset).unwrap();
    assert!(offset > 3_500_000_000, "{offset}");
}

/// Runs the binary in `dir` under `ulimit -v` of `kib` KiB (an allocation past it fails, and
/// Rust aborts on a failed allocation: what a 24 GB machine does to a 54 GB need).
fn under_ulimit(dir: &Path, kib: u64, args: &[&str]) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The case: rotating or quantising a 7B-shaped Q4_0 file aborted (SIGABRT) while
/// expanding it; now it is refused before loading, naming what it needs and the limit.
#[test]
fn a_7b_model_beyond_the_memory_is_refused_before_expanding() {
    let dir = Scratch::new("memory_checks", "7b");
    sparse_7b(&dir.join("7b.gguf"));
    let limit = 8 << 20; // 8 GiB of address space
    let rotate = ["rotate", "--model", "7b.gguf", "--out", "r.gguf"];
    refused(
        &under_ulimit(&dir, limit, &rotate),
        &[
            "rotating 7b.gguf",
            "6738415616 weights",
            "would need 54.7 GiB",
            "the address-space limit (ulimit -v)",
            "more memory, or choose a smaller model",
        ],
    );
    let quantize = [
        "quantize",
        "--model",
        "7b.gguf",
        "--out",
        "q.gguf",
        "--gguf-type",
        "q4_0",
    ];
    refused(
        &under_ulimit(&dir, limit, &quantize),
        &["quantising 7b.gguf", "would need", "ulimit -v"],
    );
    assert!(!dir.join("r.gguf").exists() && !dir.join("q.gguf").exists());
}

/// `ORTHOFORMER_MEMORY_LIMIT` lowers the budget (and a value that is not a size is refused,
/// never ignored); a model within it runs.
#[test]
fn the_memory_limit_variable_caps_the_budget() {
    let dir = Scratch::new("memory_checks", "variable");
    write_tiny_llama_gguf(&dir.join("tiny.gguf"), 1).unwrap();
    let rotate = |limit: &str| {
        Command::new(BIN)
            .args(["rotate", "--model", "tiny.gguf", "--out", "r.gguf"])
            .env("ORTHOFORMER_MEMORY_LIMIT", limit)
            .current_dir(&*dir)
            .output()
            .unwrap()
    };
    refused(
        &rotate("1K"),
        &[
            "rotating tiny.gguf",
            "ORTHOFORMER_MEMORY_LIMIT allows 1.0 KiB",
        ],
    );
    refused(
        &rotate("lots"),
        &["ORTHOFORMER_MEMORY_LIMIT=\"lots\" is not a size"],
    );
    assert!(!dir.join("r.gguf").exists());
    let o = rotate("1G");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.join("r.gguf").exists());
}

/// A SentencePiece vocabulary of nested pieces (`a` ... `a`×1000: 0.5 MB) makes half a
/// million merges of 330 MB of text, 1.5 GB to build: refused by their count under a 256 MiB
/// budget (the 5.5 MB file needed 12 GB of merge text and aborted at a 4 GB cap).
#[test]
fn nested_sentencepiece_pieces_are_refused_before_their_merges_are_built() {
    let dir = Scratch::new("memory_checks", "spm");
    let n = 1000;
    let toks: Vec<Value> = (1..=n).map(|k| Value::Str("a".repeat(k))).collect();
    let meta = vec![
        ("general.architecture".into(), Value::Str("llama".into())),
        ("llama.block_count".into(), Value::U32(1)),
        ("llama.embedding_length".into(), Value::U32(8)),
        ("llama.feed_forward_length".into(), Value::U32(16)),
        ("llama.attention.head_count".into(), Value::U32(2)),
        ("llama.attention.head_count_kv".into(), Value::U32(1)),
        ("llama.context_length".into(), Value::U32(64)),
        ("tokenizer.ggml.model".into(), Value::Str("llama".into())),
        ("tokenizer.ggml.tokens".into(), Value::Array(8, toks)),
        (
            "tokenizer.ggml.scores".into(),
            Value::Array(6, (0..n).map(|k| Value::F32(-(k as f32))).collect()),
        ),
    ];
    write_tiny_with(&dir.join("spm.gguf"), None, &meta);
    let o = Command::new(BIN)
        .args(["generate", "--model", "spm.gguf", "--prompt", "aaa"])
        .args(["--max-new-tokens", "1", "--temperature", "0"])
        .env("ORTHOFORMER_MEMORY_LIMIT", "256M")
        .current_dir(&*dir)
        .output()
        .unwrap();
    refused(
        &o,
        &[
            "SentencePiece vocabulary's merges (499500 merges of 1000 tokens",
            "ORTHOFORMER_MEMORY_LIMIT allows 256.0 MiB",
        ],
    );
}

/// `compare --seeds 1000000000` aborted allocating its seed list; `--lr-sweep` is capped
/// too. Both are refused before anything trains or is written.
#[test]
fn compare_counts_are_capped() {
    let dir = Scratch::new("memory_checks", "compare");
    let compare = |extra: &[&str]| {
        let mut args = vec!["compare", "--out", "c", "--steps", "1"];
        args.extend_from_slice(extra);
        run(&dir, &args)
    };
    refused(
        &compare(&["--seeds", "1000000000"]),
        &["1000000000 is more than 1000"],
    );
    let rates: Vec<String> = (1..=65).map(|i| format!("{i}e-4")).collect();
    refused(
        &compare(&["--lr-sweep", &rates.join(",")]),
        &["65 rates, more than 64"],
    );
    assert!(!dir.join("c").exists());
}

/// `mqar`'s lists multiply into its runs: a grid of more than 10,000 runs is refused before
/// its run list is made or anything trains.
#[test]
fn mqar_grids_are_capped() {
    let dir = Scratch::new("memory_checks", "mqar");
    let lrs: Vec<String> = (1..=10_001).map(|i| format!("{i}e-6")).collect();
    let args = [
        "mqar",
        "--attention",
        "softmax",
        "--widths",
        "64",
        "--lrs",
        &lrs.join(","),
        "--out",
        "m",
    ];
    refused(&run(&dir, &args), &["make more than 10000 runs"]);
    assert!(!dir.join("m").exists());
}
