//! `orthoformer train`, `eval` and `generate` run as the real binary on tiny configurations:
//! the loss falls, a stopped-and-resumed run is bit-identical to an
//! uninterrupted one, Ctrl-C checkpoints, generation is reproducible by seed, and every bad
//! input is one clear error line with exit status 2 and no output left behind.

use std::path::Path;
use std::process::Output;

use crate::common;
use common::{Scratch, run, stderr};

fn temp_dir(name: &str) -> Scratch {
    Scratch::new("cli-train", name)
}

/// A small, fast run: tiny model, short context, few steps; `extra` may override the preset
/// and the learning rate.
fn tiny_args<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "--context",
        "32",
        "--batch",
        "8",
        "--eval-iters",
        "2",
    ];
    args.extend_from_slice(&["--warmup", "5", "--out", out]);
    if !extra.contains(&"--preset") {
        args.extend_from_slice(&["--preset", "tiny"]);
    }
    if !extra.contains(&"--lr") {
        args.extend_from_slice(&["--lr", "3e-3"]);
    }
    args.extend_from_slice(extra);
    args
}

fn train(dir: &Path, out: &str, extra: &[&str]) -> Output {
    run(dir, &tiny_args(out, extra))
}

fn metrics(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Checks exit status 2, one error line containing `want`, and that `out` does not exist.
fn assert_fails(o: &Output, want: &str, out: &Path) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.starts_with("error: ") && err.contains(want),
        "expected {want:?} in: {err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists(), "{} was left behind", out.display());
}

#[test]
fn loss_falls_on_a_tiny_run() {
    let dir = temp_dir("falls");
    let o = train(&dir, "run", &["--steps", "60", "--eval-every", "20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = metrics(&dir.join("run/metrics.jsonl"));
    assert_eq!(m.len(), 4);
    let first = m[0]["val_loss"].as_f64().unwrap();
    let last = m[3]["val_loss"].as_f64().unwrap();
    assert!(last < first - 0.3, "val loss {first} -> {last}");
    for f in [
        "model.safetensors",
        "optimizer.safetensors",
        "state.json",
        "metrics.jsonl",
    ] {
        assert!(dir.join("run").join(f).is_file(), "{f} missing");
    }
}

#[test]
fn stopped_and_resumed_equals_uninterrupted() {
    let dir = temp_dir("resume");
    let whole = train(&dir, "whole", &["--steps", "24", "--eval-every", "8"]);
    assert!(whole.status.success(), "{}", stderr(&whole));
    let part = train(
        &dir,
        "part",
        &["--steps", "24", "--eval-every", "8", "--stop-at", "13"],
    );
    assert!(part.status.success(), "{}", stderr(&part));
    assert!(String::from_utf8_lossy(&part.stdout).contains("stopped after step 13"));
    let resumed = run(&dir, &["train", "--out", "part", "--resume"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let keep = |v: &serde_json::Value| {
        (
            v["step"].clone(),
            v["train_loss"].clone(),
            v["val_loss"].clone(),
            v["step_loss"].clone(),
        )
    };
    let a: Vec<_> = metrics(&dir.join("whole/metrics.jsonl"))
        .iter()
        .map(keep)
        .collect();
    let b: Vec<_> = metrics(&dir.join("part/metrics.jsonl"))
        .iter()
        .map(keep)
        .collect();
    assert_eq!(a, b, "loss curves differ");
    // Every tensor bit-identical (the files' JSON headers may order metadata differently).
    for f in ["model.safetensors", "optimizer.safetensors"] {
        let x = std::fs::read(dir.join("whole").join(f)).unwrap();
        let y = std::fs::read(dir.join("part").join(f)).unwrap();
        let (x, y) = (
            safetensors::SafeTensors::deserialize(&x).unwrap(),
            safetensors::SafeTensors::deserialize(&y).unwrap(),
        );
        let mut names = x.names();
        names.sort();
        let mut other = y.names();
        other.sort();
        assert_eq!(names, other, "{f}: tensor names differ");
        for n in names {
            let (a, b) = (x.tensor(n).unwrap(), y.tensor(n).unwrap());
            assert!(a.data() == b.data(), "{f}: tensor {n} differs after resume");
        }
    }
}

#[test]
fn ctrl_c_writes_a_checkpoint_that_resumes() {
    let dir = temp_dir("ctrlc");
    let args = tiny_args("run", &["--steps", "100000", "--eval-every", "5"]);
    let state = dir.join("run/state.json");
    let o = common::interrupt_when_ready(&dir, &args, std::slice::from_ref(&state));
    let err = stderr(&o);
    // EX_TEMPFAIL: resumable, not bad input.
    assert_eq!(o.status.code(), Some(75), "{err}");
    assert!(
        err.contains("interrupted at step") && err.contains("--resume"),
        "{err}"
    );
    let st: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let step = st["step"].as_u64().unwrap();
    assert!(step >= 5, "checkpoint at step {step}");
    let again = run(
        &dir,
        &[
            "train",
            "--out",
            "run",
            "--resume",
            "--steps",
            &(step + 3).to_string(),
        ],
    );
    assert!(again.status.success(), "{}", stderr(&again));
}

#[test]
fn eval_and_generation_are_reproducible() {
    let dir = temp_dir("gen");
    let o = train(&dir, "run", &["--steps", "10", "--eval-every", "10"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let generate = |seed: &str, extra: &[&str]| {
        let mut args = vec![
            "generate",
            "--checkpoint",
            "run",
            "--prompt",
            "ROMEO:",
            "--max-new-tokens",
            "40",
            "--seed",
            seed,
            "--top-k",
            "10",
        ];
        args.extend_from_slice(extra);
        let o = run(&dir, &args);
        assert!(o.status.success(), "{}", stderr(&o));
        o.stdout
    };
    let sample = |seed: &str| String::from_utf8(generate(seed, &[])).unwrap();
    let (a, b, c) = (sample("1"), sample("1"), sample("2"));
    assert!(a.starts_with("ROMEO:") && a.chars().count() >= 46, "{a:?}");
    assert_eq!(a, b);
    assert_ne!(a, c);
    // --json: the same text (seed 1), counts and speeds instead of the stream.
    let g: serde_json::Value = serde_json::from_slice(&generate("1", &["--json"])).unwrap();
    assert_eq!(format!("ROMEO:{}\n", g["text"].as_str().unwrap()), a);
    assert_eq!(
        (g["prompt_tokens"].as_u64(), g["new_tokens"].as_u64()),
        (Some(6), Some(40))
    );
    assert!(g["prompt_tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(g["decode_tokens_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(g["stopped_on_eos"], false);
    let e = run(&dir, &["eval", "--checkpoint", "run", "--json"]);
    assert!(e.status.success(), "{}", stderr(&e));
    let v: serde_json::Value = serde_json::from_slice(&e.stdout).unwrap();
    let loss = v["report"]["loss"].as_f64().unwrap();
    let bpc = v["report"]["bits_per_unit"].as_f64().unwrap();
    assert!(
        (bpc - loss / std::f64::consts::LN_2).abs() < 1e-9,
        "char level: bits = nats / ln 2"
    );
    assert!((v["report"]["perplexity"].as_f64().unwrap() - loss.exp()).abs() < 1e-9);
}

#[test]
fn bad_data_files_are_clear_errors() {
    let dir = temp_dir("baddata");
    std::fs::write(dir.join("empty.txt"), b"").unwrap();
    std::fs::write(dir.join("binary.bin"), b"abc\0\x01\x02def").unwrap();
    std::fs::write(dir.join("latin1.txt"), b"caf\xe9 au lait\n").unwrap();
    std::fs::write(dir.join("short.txt"), "To be, or not to be.\n").unwrap();
    let cases = [
        ("missing.txt", "No such file"),
        ("empty.txt", "is empty"),
        ("binary.bin", "looks binary"),
        ("latin1.txt", "not valid UTF-8"),
        ("short.txt", "longer than the data"),
    ];
    for (file, want) in cases {
        let o = train(&dir, "out", &["--data", file, "--steps", "5"]);
        assert_fails(&o, want, &dir.join("out"));
    }
}

#[test]
fn unwritable_output_folder_is_a_clear_error() {
    let dir = temp_dir("unwritable");
    std::fs::write(dir.join("afile"), b"x").unwrap();
    let o = train(&dir, "afile/run", &["--steps", "5"]);
    assert_fails(&o, "is not a folder", &dir.join("afile/run"));
}

#[test]
fn corrupt_checkpoints_and_mismatched_configs_are_clear_errors() {
    let dir = temp_dir("corrupt");
    let o = train(&dir, "run", &["--steps", "4", "--eval-every", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listing = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let before = listing(&dir.join("run"));

    // Asking for another model than the checkpoint holds.
    let o = run(
        &dir,
        &[
            "train",
            "--out",
            "run",
            "--resume",
            "--attention",
            "orthogonal",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("does not match the requested model"),
        "{}",
        stderr(&o)
    );
    let o = run(
        &dir,
        &[
            "train",
            "--out",
            "run",
            "--resume",
            "--preset",
            "tiny",
            "--context",
            "16",
        ],
    );
    assert!(
        stderr(&o).contains("does not match") && stderr(&o).contains("context"),
        "{}",
        stderr(&o)
    );
    // A new run into a folder that holds a checkpoint.
    let o = train(&dir, "run", &["--steps", "4"]);
    assert!(
        stderr(&o).contains("already holds a checkpoint"),
        "{}",
        stderr(&o)
    );

    // A truncated model file.
    let model = dir.join("run/model.safetensors");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    for args in [
        vec!["train", "--out", "run", "--resume"],
        vec!["eval", "--checkpoint", "run"],
        vec!["generate", "--checkpoint", "run"],
    ] {
        let o = run(&dir, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&o).contains("truncated or modified"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    // A corrupt state file.
    std::fs::write(&model, &bytes).unwrap();
    std::fs::write(dir.join("run/state.json"), b"{\"format\": 3").unwrap();
    let o = run(&dir, &["eval", "--checkpoint", "run"]);
    assert!(
        stderr(&o).contains("corrupt or incomplete"),
        "{}",
        stderr(&o)
    );
    let o = run(&dir, &["eval", "--checkpoint", "nowhere"]);
    assert!(stderr(&o).contains("not a folder"), "{}", stderr(&o));
    assert_eq!(
        listing(&dir.join("run")),
        before,
        "a failed command wrote files"
    );
}

#[test]
fn non_finite_loss_stops_with_a_clear_message() {
    let dir = temp_dir("nan");
    let o = train(
        &dir,
        "run",
        &[
            "--steps",
            "30",
            "--eval-every",
            "2",
            "--lr",
            "1e30",
            "--min-lr",
            "0",
            "--grad-clip",
            "0",
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("training stopped") && err.contains("lower --lr"),
        "{err}"
    );
}

#[test]
fn bad_options_are_clear_errors() {
    let dir = temp_dir("opts");
    for (extra, want) in [
        (vec!["--steps", "0"], "--steps"),
        (vec!["--min-lr", "1"], "--min-lr"),
        (vec!["--attention", "sparse"], "unknown attention"),
        (
            vec!["--vocab-size", "300"],
            "--vocab-size applies to --tokenizer bpe",
        ),
        (
            vec!["--tokenizer", "bpe", "--vocab-size", "10"],
            "too small",
        ),
        (vec!["--preset", "nope"], "nope"),
    ] {
        let o = train(&dir, "out", &extra);
        assert_fails(&o, want, &dir.join("out"));
    }
}
