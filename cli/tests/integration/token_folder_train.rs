//! `orthoformer train --data DIR` on a token folder (`python -m orthoformer.prepare`'s
//! layout): a tiny folder is written here (a BPE trained by the library on the
//! start of TinyShakespeare, its ids as `uint16`, `meta.json` as `orthoformer/tokens.py`
//! writes it); a stopped-and-resumed run is bit-identical to an uninterrupted one, a changed
//! `train.bin` is refused on resume, a lying `meta.json` is one error line with exit status 2,
//! and `eval` and `generate` read the checkpoint.

use std::path::Path;
use std::process::Output;

use crate::common::{Scratch, run, stderr};
use orthoformer::data::corpus::TINY_SHAKESPEARE;
use orthoformer::data::hf_tokenizer::tokenizer_json;
use orthoformer::data::{Tokenizer, TokenizerKind};
use orthoformer::train::checkpoint::sha256_hex;

/// Writes a token folder into `dir`: the first 30,000 bytes of TinyShakespeare as BPE ids
/// (vocabulary 300), the first 90% training, the rest validation.
fn make_folder(dir: &Path) {
    let text = &TINY_SHAKESPEARE[..30_000];
    let tok = Tokenizer::train(TokenizerKind::Bpe, text, 300).unwrap();
    let ids = tok.encode(text).unwrap();
    let cut = ids.len() * 9 / 10;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json(&tok).unwrap()).unwrap();
    write_ids(dir, &ids[..cut], &ids[cut..], tok.vocab_size());
}

/// Writes `train.bin`, `val.bin` (`uint16`) and a `meta.json` that tells the truth about them.
fn write_ids(dir: &Path, train: &[u32], val: &[u32], vocab: usize) {
    let bytes =
        |ids: &[u32]| -> Vec<u8> { ids.iter().flat_map(|&i| (i as u16).to_le_bytes()).collect() };
    let (a, b) = (bytes(train), bytes(val));
    std::fs::write(dir.join("train.bin"), &a).unwrap();
    std::fs::write(dir.join("val.bin"), &b).unwrap();
    let meta = serde_json::json!({
        "format": "orthoformer-tokens", "version": 1, "dtype": "uint16",
        "vocab_size": vocab, "tokenizer": {"kind": "hf"},
        "train_tokens": train.len(), "val_tokens": val.len(),
        "sha256": sha256_hex(&[a, b].concat()),
        "source": "tinyshakespeare (first 30000 bytes)", "text_bytes": 30_000, "eot": null,
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
}

/// The folder's ids, read back.
fn read_ids(dir: &Path, split: &str) -> Vec<u32> {
    std::fs::read(dir.join(format!("{split}.bin")))
        .unwrap()
        .chunks(2)
        .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

/// A tiny run on the folder `tokens` into `out`.
fn train(dir: &Path, out: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "train",
        "--data",
        "tokens",
        "--preset",
        "tiny",
        "--context",
        "16",
        "--batch",
        "4",
        "--eval-iters",
        "2",
        "--warmup",
        "2",
        "--lr",
        "3e-3",
        "--steps",
        "10",
        "--eval-every",
        "4",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    run(dir, &args)
}

/// Exit status 2 and one error line containing every one of `want`.
fn assert_refused(o: &Output, want: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for w in want {
        assert!(err.contains(w), "expected {w:?} in: {err}");
    }
}

fn metrics(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tensors_equal(a: &Path, b: &Path) {
    for f in ["model.safetensors", "optimizer.safetensors"] {
        let (x, y) = (
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
        );
        let x = safetensors::SafeTensors::deserialize(&x).unwrap();
        let y = safetensors::SafeTensors::deserialize(&y).unwrap();
        let mut names = x.names();
        names.sort();
        assert!(!names.is_empty());
        for n in names {
            let same = x.tensor(n).unwrap().data() == y.tensor(n).unwrap().data();
            assert!(same, "{f}: tensor {n} differs after resume");
        }
    }
}

#[test]
fn token_folder_run_resumes_bit_for_bit() {
    let dir = Scratch::new("token-folder", "resume");
    make_folder(&dir.join("tokens"));
    let whole = train(&dir, "whole", &[]);
    assert!(whole.status.success(), "{}", stderr(&whole));
    let said = String::from_utf8_lossy(&whole.stdout);
    assert!(
        said.contains("data: token folder") && said.contains("hf tokenizer, vocabulary 300"),
        "{said}"
    );
    let part = train(&dir, "part", &["--stop-at", "5"]);
    assert!(part.status.success(), "{}", stderr(&part));
    let resumed = run(&dir, &["train", "--out", "part", "--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let keep = |v: &serde_json::Value| {
        let k = ["step", "train_loss", "val_loss", "step_loss"];
        k.map(|k| v[k].clone())
    };
    let a: Vec<_> = metrics(&dir.join("whole/metrics.jsonl"))
        .iter()
        .map(keep)
        .collect();
    let b: Vec<_> = metrics(&dir.join("part/metrics.jsonl"))
        .iter()
        .map(keep)
        .collect();
    assert_eq!(a.len(), 4, "records at steps 0, 4, 8, 10");
    assert_eq!(a, b, "loss curves differ");
    tensors_equal(&dir.join("whole"), &dir.join("part"));
    // The checkpoint records the folder as PyTorch's trainer does, and the batch count.
    let st: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("whole/state.json")).unwrap()).unwrap();
    let folder = std::fs::canonicalize(dir.join("tokens")).unwrap();
    assert_eq!(st["data"]["source"], folder.to_str().unwrap());
    assert_eq!(st["sampler_word_pos"], "10");
    assert_eq!(st["tokenizer"]["kind"], "hf");
    // eval scores val.bin; generate reads and writes text through the folder's tokenizer.
    let e = run(&dir, &["eval", "--checkpoint", "whole", "--json"]);
    assert!(e.status.success(), "{}", stderr(&e));
    let v: serde_json::Value = serde_json::from_slice(&e.stdout).unwrap();
    assert!(v["data"].as_str().unwrap().contains("val.bin"), "{v}");
    let (scored, n) = (
        v["report"]["tokens"].as_u64().unwrap(),
        read_ids(&dir.join("tokens"), "val").len() as u64,
    );
    assert!(
        scored + 1 >= n && scored <= n,
        "scored {scored} of {n} validation tokens"
    );
    let args = [
        "generate",
        "--checkpoint",
        "whole",
        "--prompt",
        "ROMEO:",
        "--max-new-tokens",
        "5",
    ];
    let g = run(&dir, &args);
    assert!(g.status.success(), "{}", stderr(&g));
    assert!(String::from_utf8_lossy(&g.stdout).starts_with("ROMEO:"));
}

#[test]
fn changed_token_files_are_refused_on_resume() {
    let dir = Scratch::new("token-folder", "changed");
    let tokens = dir.join("tokens");
    make_folder(&tokens);
    let part = train(&dir, "part", &["--stop-at", "2"]);
    assert!(part.status.success(), "{}", stderr(&part));
    let (mut train_ids, val_ids) = (read_ids(&tokens, "train"), read_ids(&tokens, "val"));
    let meta = std::fs::read(tokens.join("meta.json")).unwrap();
    // One id changed, meta.json left as it was: its SHA-256 no longer describes the files.
    train_ids[7] = (train_ids[7] + 1) % 300;
    let bytes: Vec<u8> = train_ids
        .iter()
        .flat_map(|&i| (i as u16).to_le_bytes())
        .collect();
    std::fs::write(tokens.join("train.bin"), bytes).unwrap();
    let o = run(&dir, &["train", "--out", "part", "--resume"]);
    assert_refused(
        &o,
        &["tokens", "sha256 is not the SHA-256 of train.bin + val.bin"],
    );
    // Prepared again (meta.json agrees with the changed files): not the checkpoint's data.
    write_ids(&tokens, &train_ids, &val_ids, 300);
    let o = run(&dir, &["train", "--out", "part", "--resume"]);
    assert_refused(&o, &["tokens", "is not the one checkpoint", "SHA-256"]);
    // A text is not the token folder the run was trained on.
    std::fs::write(dir.join("text.txt"), "hello there\n".repeat(500)).unwrap();
    let o = run(
        &dir,
        &["train", "--out", "part", "--resume", "--data", "text.txt"],
    );
    assert_refused(&o, &["was trained on the token folder"]);
    // The original files back (moved to another folder): it resumes from there.
    std::fs::write(tokens.join("meta.json"), meta).unwrap();
    let moved = dir.join("moved");
    make_folder(&moved);
    let o = run(
        &dir,
        &["train", "--out", "part", "--resume", "--data", "moved"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn lying_token_folders_are_one_line_and_exit_2() {
    let dir = Scratch::new("token-folder", "lying");
    let tokens = dir.join("tokens");
    make_folder(&tokens);
    let (train_ids, val_ids) = (read_ids(&tokens, "train"), read_ids(&tokens, "val"));
    let meta_path = tokens.join("meta.json");
    let good: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    let with = |key: &str, value: serde_json::Value| {
        let mut m = good.clone();
        m[key] = value;
        std::fs::write(&meta_path, m.to_string()).unwrap();
    };
    // Counts that are not the files' sizes.
    with("train_tokens", serde_json::json!(train_ids.len() + 1));
    assert_refused(
        &train(&dir, "a", &[]),
        &["train.bin holds", "bytes but meta.json says"],
    );
    assert!(!dir.join("a").exists(), "nothing written");
    with("val_tokens", serde_json::json!(u64::MAX));
    assert_refused(
        &train(&dir, "a", &[]),
        &["val.bin holds", "bytes but meta.json says"],
    );
    with("dtype", serde_json::json!("uint8"));
    assert_refused(&train(&dir, "a", &[]), &["dtype must be uint16 or uint32"]);
    with("vocab_size", serde_json::json!(299));
    assert_refused(
        &train(&dir, "a", &[]),
        &["vocab_size 299 is not the 300 tokens"],
    );
    // An id at the vocabulary's size (meta.json otherwise true).
    let mut bad = train_ids.clone();
    bad[3] = 300;
    write_ids(&tokens, &bad, &val_ids, 300);
    assert_refused(
        &train(&dir, "a", &[]),
        &["train.bin holds token id 300", "not below"],
    );
    write_ids(&tokens, &train_ids, &val_ids, 300);
    // A validation split shorter than one window.
    write_ids(&tokens, &train_ids, &val_ids[..10], 300);
    assert_refused(&train(&dir, "a", &[]), &["validation tokens number 10"]);
    write_ids(&tokens, &train_ids, &val_ids, 300);
    // The tokenizer flags with a folder, and a folder without its tokenizer.
    assert_refused(
        &train(&dir, "a", &["--tokenizer", "bpe"]),
        &["drop --tokenizer"],
    );
    assert_refused(
        &train(&dir, "a", &["--vocab-size", "400"]),
        &["drop --tokenizer"],
    );
    std::fs::rename(tokens.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    assert_refused(&train(&dir, "a", &[]), &["has no tokenizer.json"]);
    // train.bin a link out of the folder.
    std::fs::rename(dir.join("tokenizer.json"), tokens.join("tokenizer.json")).unwrap();
    std::fs::rename(tokens.join("train.bin"), dir.join("train.bin")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.join("train.bin"), tokens.join("train.bin")).unwrap();
        assert_refused(&train(&dir, "a", &[]), &["outside its folder"]);
    }
    assert!(!dir.join("a").exists(), "nothing written");
}

/// A tiny comparison on the folder `tokens` into `out`.
fn compare(dir: &Path, out: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "compare",
        "--data",
        "tokens",
        "--preset",
        "tiny",
        "--context",
        "16",
        "--batch",
        "4",
        "--steps",
        "6",
        "--eval-every",
        "3",
        "--eval-iters",
        "2",
        "--seeds",
        "1",
        "--attention",
        "softmax,orthogonal",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    run(dir, &args)
}

#[test]
fn compare_on_a_token_folder_stops_and_resumes() {
    let dir = Scratch::new("token-folder", "compare");
    make_folder(&dir.join("tokens"));
    let whole = compare(&dir, "whole", &["--json"]);
    assert!(whole.status.success(), "{}", stderr(&whole));
    let a: serde_json::Value = serde_json::from_slice(&whole.stdout).unwrap();
    assert_eq!(a["tokenizer"], "hf");
    assert_eq!(a["vocab_size"], 300);
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("whole/plan.json")).unwrap()).unwrap();
    assert_eq!(plan["token_folder"], true);
    let part = compare(&dir, "part", &["--stop-at", "2"]);
    assert!(part.status.success(), "{}", stderr(&part));
    assert!(String::from_utf8_lossy(&part.stdout).contains("data: token folder"));
    let o = run(&dir, &["compare", "--resume", "--out", "part", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let b: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let finals = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        let variants = v["variants"].as_array().unwrap();
        variants
            .iter()
            .map(|x| x["seeds"][0]["final_val_loss"].clone())
            .collect()
    };
    assert_eq!(finals(&a).len(), 2);
    assert_eq!(finals(&a), finals(&b), "resumed comparison differs");
    // The tokenizer flags are refused with a folder; a changed folder is refused on resume.
    let o = compare(&dir, "c", &["--tokenizer", "char"]);
    assert_refused(&o, &["drop --tokenizer"]);
    let o = run(
        &dir,
        &["compare", "--resume", "--out", "part", "--data", "other"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let tokens = dir.join("tokens");
    let (mut t, v) = (read_ids(&tokens, "train"), read_ids(&tokens, "val"));
    t.swap(0, 1);
    write_ids(&tokens, &t, &v, 300);
    let o = run(&dir, &["compare", "--resume", "--out", "part"]);
    assert_refused(&o, &["not the comparison's token folder"]);
}
