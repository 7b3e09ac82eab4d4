//! Every failure is one line on stderr starting `error:` and exit status 2 (a
//! requested check that fails exits 1); sizes too large for the machine are refused before
//! anything is allocated or written, saying how much memory they need and how much there is;
//! wrong answers (NaN losses, wrapped totals, an infinite learning rate) are errors; the
//! embedded TinyShakespeare is the default wherever help says so, from any working folder.

use crate::models as common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::tiny_llama::{write_tiny, write_tiny_bytes};

const MAX: &str = "18446744073709551615";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("orthoformer-errors-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

use crate::common::{run as run_in, run_args as run};

/// Asserts exit status 2 and exactly one stderr line `error: ...` containing `needle`.
#[track_caller]
fn one_line_error(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.ends_with('\n') && err.lines().count() == 1,
        "one line: {err:?}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in {err}");
}

/// The message of a request too large for this machine.
const TOO_LARGE: &str = "would need";

fn text_file() -> PathBuf {
    let p = tmp("small.txt");
    if !p.exists() {
        std::fs::write(
            &p,
            "the cat sat on the mat. the dog ate the hat.\n".repeat(200),
        )
        .unwrap();
    }
    p
}

/// A tiny character-level checkpoint trained for 2 steps.
fn checkpoint(name: &str) -> PathBuf {
    let dir = tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    let data = text_file();
    let out = run(&[
        "train",
        "--data",
        data.to_str().unwrap(),
        "--preset",
        "tiny",
        "--context",
        "8",
        "--steps",
        "2",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn sizes_too_large_for_the_machine_are_refused_before_anything_is_written() {
    let out_dir = tmp("huge-batch");
    let o = run(&[
        "train",
        "--batch",
        "100000000",
        "--steps",
        "1",
        "--out",
        s(&out_dir),
    ]);
    one_line_error(&o, TOO_LARGE);
    assert!(String::from_utf8_lossy(&o.stderr).contains("available"));
    assert!(!out_dir.exists(), "a refused run leaves no --out folder");
    one_line_error(&run(&["init", "--shape", "100000,100000"]), TOO_LARGE);
    one_line_error(&run(&["init", "--count", "100000000"]), TOO_LARGE);
    let probe = tmp("probe");
    one_line_error(
        &run(&["init-probe", "--width", "100000", "--out-dir", s(&probe)]),
        TOO_LARGE,
    );
    assert!(!probe.exists());
    one_line_error(&run(&["init-bench", "--shape", "100000x100000"]), TOO_LARGE);
    // A width no machine holds, from a config file.
    let cfg = tmp("wide.toml");
    std::fs::write(
        &cfg,
        "vocab_size = 65\ncontext = 64\nn_layer = 1\nn_head = 4\nd_model = 65536\n\
         d_ff = 262144\nattention = \"softmax\"\nnorm = \"pre\"\nattn_bias = false\n\
         ffn_bias = true\ndropout = 0.0\nfrozen_method = \"qr\"\nfrozen_seed = 0\n",
    )
    .unwrap();
    let wide = tmp("wide-run");
    one_line_error(
        &run(&[
            "train",
            "--config",
            s(&cfg),
            "--steps",
            "1",
            "--out",
            s(&wide),
        ]),
        TOO_LARGE,
    );
    assert!(!wide.exists());
}

#[test]
fn sizes_that_overflow_are_errors_not_wrapped_totals() {
    one_line_error(&run(&["params", "--batch", MAX]), "overflows");
    let base = "vocab_size = 65\nn_head = 1\nattention = \"softmax\"\nnorm = \"pre\"\n\
                attn_bias = false\nffn_bias = true\ndropout = 0.0\nfrozen_method = \"qr\"\n\
                frozen_seed = 0\n";
    let cfg = |name: &str, dims: &str| {
        let p = tmp(name);
        std::fs::write(&p, format!("{base}{dims}")).unwrap();
        p
    };
    for (name, dims) in [
        (
            "dff.toml",
            format!("context = 64\nn_layer = 2\nd_model = 128\nd_ff = {MAX}\n"),
        ),
        (
            "dmodel.toml",
            "context = 64\nn_layer = 2\nd_model = 4611686018427387904\nd_ff = 512\n".into(),
        ),
        (
            "context.toml",
            "context = 9223372036854775807\nn_layer = 1\nd_model = 4\nd_ff = 4\n".into(),
        ),
    ] {
        let p = cfg(name, &dims);
        one_line_error(&run(&["params", "--config", s(&p)]), "overflows 64-bit");
        let out = tmp(&format!("{name}-run"));
        one_line_error(
            &run(&["train", "--config", s(&p), "--steps", "1", "--out", s(&out)]),
            "overflows 64-bit",
        );
    }
    // 2^24 layers are accounted in closed form, at once.
    let deep = cfg(
        "deep.toml",
        "context = 64\nn_layer = 16777216\nd_model = 128\nd_ff = 512\n",
    );
    let o = run(&["params", "--config", s(&deep), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A long context: the account of a huge sequence is an error, not a hang.
    let long = cfg(
        "long.toml",
        "context = 4294967296\nn_layer = 1\nd_model = 4\nd_ff = 4\n",
    );
    one_line_error(&run(&["params", "--config", s(&long)]), "overflows");
}

#[test]
fn config_errors_are_one_line() {
    let bad = tmp("bad.toml");
    std::fs::write(&bad, "vocab_size = 65\ncontext = [\n").unwrap();
    one_line_error(&run(&["params", "--config", s(&bad)]), "bad TOML config");
    let out = tmp("bad-toml-run");
    one_line_error(
        &run(&["train", "--config", s(&bad), "--out", s(&out)]),
        "bad TOML config",
    );
    let json = tmp("bad.json");
    std::fs::write(&json, "{\"vocab_size\":\n").unwrap();
    one_line_error(
        &run(&["train", "--config", s(&json), "--out", s(&out)]),
        "bad JSON config",
    );
}

#[test]
fn training_options_that_would_hang_or_go_wrong() {
    let data = text_file();
    let out = tmp("eval-iters-run");
    one_line_error(
        &run(&[
            "train",
            "--data",
            s(&data),
            "--eval-iters",
            "1000000000000",
            "--out",
            s(&out),
        ]),
        "--eval-iters",
    );
    assert!(!out.exists());
    // A warm-up of 2^64 - 1 steps: a tiny, finite learning rate, not an infinite one.
    let warm = tmp("warmup-run");
    let _ = std::fs::remove_dir_all(&warm);
    let o = run(&[
        "train",
        "--data",
        s(&data),
        "--preset",
        "tiny",
        "--context",
        "8",
        "--steps",
        "2",
        "--warmup",
        MAX,
        "--json",
        "--out",
        s(&warm),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for m in v["metrics"].as_array().unwrap() {
        let lr = m["lr"].as_f64().unwrap();
        assert!(lr.is_finite() && lr <= 2e-3, "{lr}");
    }
    // A BPE vocabulary of 2^64 - 1: the vocabulary the text can give.
    let bpe = tmp("bpe-huge-vocab");
    let _ = std::fs::remove_dir_all(&bpe);
    let o = run(&[
        "train",
        "--data",
        s(&data),
        "--tokenizer",
        "bpe",
        "--vocab-size",
        MAX,
        "--preset",
        "tiny",
        "--context",
        "8",
        "--steps",
        "1",
        "--json",
        "--out",
        s(&bpe),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn eval_of_a_checkpoint() {
    let ck = checkpoint("eval-ck");
    one_line_error(
        &run(&["eval", "--checkpoint", s(&ck), "--eval-iters", "0"]),
        "--eval-iters 0",
    );
    let o = run(&["eval", "--checkpoint", s(&ck)]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text.lines().find(|l| l.starts_with("bits/")).unwrap();
    assert!(line.starts_with("bits/character "), "{line:?}");
    // A state.json edited to batch 0: an error, never a panic (chunks of 0 windows).
    let state = ck.join("state.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    v["options"]["batch"] = 0.into();
    std::fs::write(&state, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    one_line_error(&run(&["eval", "--checkpoint", s(&ck)]), "");
    one_line_error(
        &run(&["train", "--resume", "--steps", "4", "--out", s(&ck)]),
        "",
    );
    // Resuming with a batch no machine holds is refused before anything is allocated.
    v["options"]["batch"] = 100_000_000_000u64.into();
    std::fs::write(&state, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    one_line_error(
        &run(&["train", "--resume", "--steps", "4", "--out", s(&ck)]),
        "",
    );
}

#[test]
fn sampling_options_are_checked_the_same_way_for_both_models() {
    let ck = checkpoint("generate-ck");
    let gguf = tmp("tiny.gguf");
    write_tiny(&gguf, None);
    let msg = "--temperature NaN must be 0 (greedy) or a positive number";
    one_line_error(
        &run(&["generate", "--checkpoint", s(&ck), "--temperature", "NaN"]),
        msg,
    );
    one_line_error(
        &run(&[
            "generate",
            "--model",
            s(&gguf),
            "--prompt",
            "ab",
            "--temperature",
            "NaN",
        ]),
        msg,
    );
    one_line_error(
        &run(&[
            "generate",
            "--model",
            s(&gguf),
            "--prompt",
            "ab",
            "--max-new-tokens",
            MAX,
        ]),
        "--max-new-tokens 18446744073709551615 is more than one generation makes",
    );
}

#[test]
fn a_broken_tokenizer_json_is_an_error() {
    let gguf = tmp("tok.gguf");
    write_tiny(&gguf, None);
    let loaded = orthoformer::model::llama::load_model(&gguf).unwrap();
    let dir = tmp("hf-broken-tokenizer");
    orthoformer::export::llama::save_hf_folder(
        &loaded.weights,
        &loaded.tokenizer,
        &loaded.special,
        &dir,
    )
    .unwrap();
    let path = dir.join("tokenizer.json");
    let text = std::fs::read_to_string(&path).unwrap();
    // A syntax error inside the decoder: the tokenizers crate panics on it.
    let at = text.find("\"decoder\"").unwrap();
    let broken = format!(
        "{}\"decoder\": {{\"type\": \"ByteLevel\", \"x\": tru}}}}",
        &text[..at]
    );
    std::fs::write(&path, broken).unwrap();
    one_line_error(
        &run(&["generate", "--model", s(&dir), "--prompt", "ab"]),
        "tokenizer",
    );
}

/// `eval --model`, `rotate --check` and friends read the embedded TinyShakespeare by
/// default, from any working folder; `rotate` checks its inputs before writing anything.
#[test]
fn pretrained_model_commands_default_to_the_embedded_text() {
    let gguf = tmp("bytes.gguf");
    write_tiny_bytes(&gguf, 300);
    let elsewhere = tmp("empty-cwd");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let o = run_in(
        &elsewhere,
        &[
            "eval",
            "--model",
            s(&gguf),
            "--max-tokens",
            "64",
            "--context",
            "16",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("tinyshakespeare (embedded)"));
    let rotated = tmp("rotated.gguf");
    let o = run_in(
        &elsewhere,
        &[
            "rotate",
            "--model",
            s(&gguf),
            "--check",
            "--check-tokens",
            "32",
            "--context",
            "16",
            "--out",
            s(&rotated),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Bad inputs are refused before the output is written.
    let never = tmp("never.gguf");
    for (flag, value, needle) in [
        ("--tolerance", "NaN", "--tolerance NaN"),
        ("--check-tokens", "0", "--check-tokens"),
        ("--context", "1", "--context must be at least 2"),
        ("--context", "1000", "--context 1000 exceeds"),
        ("--data", "/no/such/file.txt", "/no/such/file.txt"),
    ] {
        // The model's window is 64: the default --context 128 is itself refused.
        let mut args = vec!["rotate", "--model", s(&gguf), "--check", "--out", s(&never)];
        if flag != "--context" {
            args.extend(["--context", "16"]);
        }
        args.extend([flag, value]);
        let o = run_in(&elsewhere, &args);
        one_line_error(&o, needle);
        assert!(!never.exists(), "{flag} {value}: nothing written");
    }
    // A check whose logits would not fit: a vocabulary of 2^17 over the whole text.
    let wide = tmp("wide-vocab.gguf");
    write_tiny_bytes(&wide, 1 << 17);
    let o = run_in(
        &elsewhere,
        &[
            "rotate",
            "--model",
            s(&wide),
            "--check",
            "--check-tokens",
            "100000000",
            "--context",
            "16",
            "--out",
            s(&never),
        ],
    );
    one_line_error(&o, TOO_LARGE);
    assert!(!never.exists());
}

/// A plot that cannot be written names the file and the reason.
#[test]
fn a_failed_plot_write_keeps_its_cause() {
    let dir = tmp("probe-svg-blocked");
    let _ = std::fs::remove_dir_all(&dir);
    // A folder where the SVG should go: the rename over it fails.
    std::fs::create_dir_all(dir.join("init_probe.svg").join("x")).unwrap();
    // The folder is a report folder Orthoformer made (it may write there again).
    std::fs::write(dir.join(".orthoformer"), "orthoformer-folder report\n").unwrap();
    let o = run(&[
        "init-probe",
        "--depth",
        "2",
        "--width",
        "4",
        "--batch",
        "4",
        "--out-dir",
        s(&dir),
    ]);
    one_line_error(&o, "init_probe.svg: ");
    let err = String::from_utf8_lossy(&o.stderr);
    // The file set names the folder in the way before it commits anything.
    assert!(
        err.contains("is a folder where a file"),
        "the cause is kept: {err}"
    );
}
