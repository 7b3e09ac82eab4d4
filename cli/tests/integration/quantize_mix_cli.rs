//! `quantize --out` with llama-quantize's mixes, through the
//! binary on the tiny Llama (width 64, FFN 128, 2 layers, vocabulary 257): every tensor's
//! type is the mix's rule, an override or a stated fallback, the file type names what the
//! file holds, and what cannot be done refuses in one line before any work.

use crate::common::{Scratch, run, stderr};

use orthoformer::export::llama::save_gguf;
use orthoformer::export::tiny_llama::{byte_tokenizer_metadata, tiny_llama_weights};
use orthoformer::io::gguf::provenance::sha256_hex;
use orthoformer::io::gguf::{GgmlType, GgufFile, Value};

fn tiny(dir: &Scratch) {
    let w = tiny_llama_weights(0);
    save_gguf(
        &w,
        &byte_tokenizer_metadata(),
        &dir.join("m.gguf"),
        GgmlType::F32,
    )
    .unwrap();
    std::fs::write(
        dir.join("t.txt"),
        "the quick brown fox jumps over it. ".repeat(20),
    )
    .unwrap();
}

fn quantize(dir: &Scratch, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "quantize",
        "--model",
        "m.gguf",
        "--data",
        "t.txt",
        "--calib-tokens",
        "64",
        "--context",
        "16",
        "--out",
        "q.gguf",
        "--json",
    ];
    args.extend_from_slice(extra);
    run(dir, &args)
}

#[test]
fn a_mix_stores_each_tensor_as_its_rule_override_or_fallback_says() {
    let dir = Scratch::new("quantize_mix_cli", "mix");
    tiny(&dir);
    for method in ["imatrix", "gptq", "search"] {
        let mut extra = vec!["--gguf-type", "q4_k_m", "--method", method];
        extra.extend(["--tensor-type", "blk.1.attn_output=q8_0"]);
        if method == "gptq" {
            extra.push("--sequential");
        }
        let o = quantize(&dir, &extra);
        assert!(o.status.success(), "{method}: {}", stderr(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["file_type"], "MOSTLY_Q4_K_M", "{r}");
        assert_eq!(r["greedy_same"], true, "{r}");
        // Rows of 64 and 128 are no whole super-blocks: q4_k falls back to q5_0, q6_k (the
        // tied embedding's output rule; attn_v and ffn_down where llama.cpp's use_more_bits
        // holds, layer 1 of 2) to q8_0.
        let g = GgufFile::open(&dir.join("q.gguf")).unwrap();
        let ty = |n: &str| g.tensor(n).unwrap().ty;
        assert_eq!(ty("blk.0.attn_q.weight"), GgmlType::Q5_0);
        assert_eq!(ty("blk.0.attn_v.weight"), GgmlType::Q5_0);
        assert_eq!(ty("blk.1.attn_v.weight"), GgmlType::Q8_0);
        assert_eq!(ty("blk.0.ffn_down.weight"), GgmlType::Q5_0);
        assert_eq!(ty("blk.1.ffn_down.weight"), GgmlType::Q8_0);
        assert_eq!(ty("blk.1.attn_output.weight"), GgmlType::Q8_0);
        assert_eq!(ty("blk.0.attn_output.weight"), GgmlType::Q5_0);
        assert_eq!(ty("token_embd.weight"), GgmlType::Q8_0);
        assert_eq!(r["overridden"].as_array().unwrap().len(), 1, "{r}");
        let falls = r["fallbacks"].as_array().unwrap();
        assert!(
            falls.iter().any(|f| f
                .as_str()
                .unwrap()
                .starts_with("blk.0.attn_q.weight: q4_k -> q5_0")),
            "{r}"
        );
        let want_cal = if method == "search" {
            "none"
        } else {
            "the last 64 tokens of t.txt"
        };
        assert_eq!(r["calibration_text"], want_cal, "{r}");
        assert_eq!(r["sequential"], method == "gptq");
        // The file says how it was made.
        let key = |k: &str| g.get(&format!("orthoformer.quantize.{k}")).cloned();
        assert_eq!(key("type"), Some(Value::Str("q4_k_m".into())));
        assert_eq!(key("rotation"), Some(Value::Str("none".into())));
        let tokens = if method == "search" { 0 } else { 64 };
        assert_eq!(key("calibration.tokens"), Some(Value::U64(tokens)));
        if method != "search" {
            let text = std::fs::read(dir.join("t.txt")).unwrap();
            assert_eq!(
                key("calibration.text_sha256"),
                Some(Value::Str(sha256_hex(&text)))
            );
        }
    }
    // IQ4_NL on rows of 64: every decoder matrix; the tied embedding by the output rule.
    let o = quantize(&dir, &["--gguf-type", "iq4_nl", "--method", "imatrix"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["file_type"], "MOSTLY_IQ4_NL", "{r}");
    let g = GgufFile::open(&dir.join("q.gguf")).unwrap();
    assert_eq!(
        g.tensor("blk.1.ffn_down.weight").unwrap().ty,
        GgmlType::IQ4_NL
    );
    // Folding the final norm into a tied head unties it: the report says so and what it costs.
    let mut w = tiny_llama_weights(0);
    w.final_norm
        .iter_mut()
        .enumerate()
        .for_each(|(i, g)| *g = 1.0 + 0.01 * i as f32);
    save_gguf(
        &w,
        &byte_tokenizer_metadata(),
        &dir.join("u.gguf"),
        GgmlType::F32,
    )
    .unwrap();
    let o = run(
        &dir,
        &[
            "quantize",
            "--model",
            "u.gguf",
            "--out",
            "q.gguf",
            "--gguf-type",
            "q8_0",
            "--method",
            "search",
            "--rotate",
            "hadamard",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["head_untied"], true, "{r}");
    let g = GgufFile::open(&dir.join("q.gguf")).unwrap();
    let head = g.tensor("output.weight").expect("an untied head");
    assert_eq!(r["head_bytes"].as_u64(), head.ty.byte_size(257 * 64));
    // A single format names the file for what most weights are stored as.
    let o = quantize(&dir, &["--gguf-type", "q4_k", "--method", "search"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["file_type"], "MOSTLY_Q5_0", "{r}");
}

/// A calibration file written by one run and read by the next gives the same file, byte for
/// byte, as calibrating afresh; another rotation (other weights) is refused by name and
/// writes nothing.
#[test]
fn a_calibration_file_is_reused_exactly_and_refused_when_it_does_not_match() {
    let dir = Scratch::new("quantize_mix_cli", "calibration");
    tiny(&dir);
    let args = ["--gguf-type", "q4_0", "--method", "gptq"];
    let o = quantize(&dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let fresh = std::fs::read(dir.join("q.gguf")).unwrap();
    let with = [&args[..], &["--calibration", "c.safetensors"]].concat();
    for want in ["written", "read"] {
        let o = quantize(&dir, &with);
        assert!(o.status.success(), "{want}: {}", stderr(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["calibration_file"], want, "{r}");
        assert_eq!(std::fs::read(dir.join("q.gguf")).unwrap(), fresh, "{want}");
    }
    std::fs::remove_file(dir.join("q.gguf")).unwrap();
    let o = quantize(&dir, &[&with[..], &["--rotate", "hadamard"]].concat());
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("c.safetensors: it was made with another model_sha256"),
        "{e}"
    );
    assert!(!dir.join("q.gguf").exists());
}

#[test]
fn what_a_file_cannot_take_is_refused_before_any_work() {
    let dir = Scratch::new("quantize_mix_cli", "refused");
    tiny(&dir);
    let cases: [(&[&str], &str); 5] = [
        (
            &["--gguf-type", "q4_k_m", "--tensor-type", "attn_v"],
            "PATTERN=TYPE",
        ),
        (
            &["--gguf-type", "q4_k_m", "--tensor-type", "attn_v=q3_k"],
            "not a block format",
        ),
        (&["--gguf-type", "q4_k_x"], "q4_k_m"),
        (
            &["--gguf-type", "q4_k_m", "--method", "rtn", "--sequential"],
            "--sequential",
        ),
        (&["--gguf-type", "q5_k_m", "--wbits", "4"], "--wbits"),
    ];
    for (extra, want) in cases {
        let o = quantize(&dir, extra);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {e}");
        assert!(
            e.contains(want) && e.trim_end().lines().count() == 1,
            "{extra:?}: {e}"
        );
        assert!(!dir.join("q.gguf").exists(), "{extra:?} wrote a file");
    }
    // The study has no GGUF block format to search in.
    let o = run(
        &dir,
        &[
            "quantize", "--model", "m.gguf", "--data", "t.txt", "--wbits", "4", "--method",
            "imatrix",
        ],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--method imatrix") && e.contains("--out"), "{e}");
}

#[test]
fn a_hugging_face_folder_quantises_to_gguf_or_is_refused_by_its_tokenizer() {
    let dir = Scratch::new("quantize_mix_cli", "hf");
    tiny(&dir);
    let o = run(&dir, &["rotate", "--model", "m.gguf", "--out", "hf"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(
        &dir,
        &[
            "quantize",
            "--model",
            "hf",
            "--out",
            "q.gguf",
            "--gguf-type",
            "q8_0",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let g = GgufFile::open(&dir.join("q.gguf")).unwrap();
    assert_eq!(g.get_str("tokenizer.ggml.pre").unwrap(), "gpt-2");
    assert_eq!(g.get_u64("tokenizer.ggml.eos_token_id").unwrap(), 256);
    // `rotate` writes a GGUF from a folder the same way.
    let o = run(
        &dir,
        &[
            "rotate",
            "--model",
            "hf",
            "--out",
            "r.gguf",
            "--check",
            "--data",
            "t.txt",
            "--context",
            "16",
            "--check-tokens",
            "32",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = GgufFile::open(&dir.join("r.gguf")).unwrap();
    assert_eq!(r.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    // It says which rotation it holds and its seed (the default, 0).
    assert_eq!(r.get_str("orthoformer.rotate.rotation").unwrap(), "R1");
    assert_eq!(r.get_u64("orthoformer.rotate.seed").unwrap(), 0);
    std::fs::remove_file(dir.join("r.gguf")).unwrap();
    // A normaliser llama.cpp's gpt2 tokenizer does not run: refused, nothing written.
    let tj = dir.join("hf/tokenizer.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&tj).unwrap()).unwrap();
    doc["normalizer"] = serde_json::json!({"type": "NFC"});
    std::fs::write(&tj, doc.to_string()).unwrap();
    let o = run(
        &dir,
        &[
            "quantize",
            "--model",
            "hf",
            "--out",
            "r.gguf",
            "--gguf-type",
            "q8_0",
        ],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("normalizer \"NFC\"") && e.trim_end().lines().count() == 1,
        "{e}"
    );
    assert!(!dir.join("r.gguf").exists());
}
