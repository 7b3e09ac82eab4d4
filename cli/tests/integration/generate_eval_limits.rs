//! "Unbounded or ignored limits" and "wrong results accepted" on `generate` and
//! `eval --checkpoint`: a token budget beyond the library's cap is refused (it ran for years),
//! `--kv-cache` and `--dot` are refused by name with a checkpoint (they were ignored), and
//! `eval --checkpoint` rechecks the SHA-256 of the recorded training text or token folder as
//! resume does (it scored whatever the path held). Each refusal is one line with exit 2.

use std::path::Path;
use std::process::Output;

use crate::common::{Scratch, run, stderr, token_folder};
use orthoformer::data::corpus::TINY_SHAKESPEARE;

/// Exit 2 and one line `error: ...` containing every needle.
#[track_caller]
fn refused(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: ") && err.lines().count() == 1,
        "{err:?}"
    );
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in {err}");
    }
}

/// A tiny run on `data` (a text file or a token folder) into `dir/run`.
fn train(dir: &Path, data: &str) {
    let o = run(
        dir,
        &[
            "train",
            "--data",
            data,
            "--preset",
            "tiny",
            "--context",
            "16",
            "--batch",
            "4",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--eval-every",
            "2",
            "--eval-iters",
            "1",
            "--out",
            "run",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn generate_caps_its_budget_and_refuses_what_a_checkpoint_ignores() {
    let dir = Scratch::new("limits", "generate");
    std::fs::write(dir.join("text.txt"), &TINY_SHAKESPEARE[..8_000]).unwrap();
    train(&dir, "text.txt");
    let generate = |extra: &[&str]| {
        let mut args = vec!["generate", "--checkpoint", "run", "--prompt", "A"];
        args.extend_from_slice(extra);
        run(&dir, &args)
    };
    refused(
        &generate(&["--max-new-tokens", "1000000000000"]),
        &["--max-new-tokens 1000000000000 is more than", "(1048576)"],
    );
    refused(
        &generate(&["--kv-cache", "f16"]),
        &["--kv-cache applies to a pretrained --model only"],
    );
    refused(
        &generate(&["--dot", "q8"]),
        &["--dot applies to a pretrained --model only"],
    );
    refused(
        &generate(&["--kv-cache", "q8", "--dot", "f32"]),
        &["--kv-cache and --dot apply"],
    );
    // Without them a checkpoint generates.
    let o = generate(&["--max-new-tokens", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `generate` with several prompts or `--parallel` runs one batch whose
/// sequence i is the single generation with seed `--seed` + i; bad batches are refused in
/// one line before the model is read.
#[test]
fn a_generate_batch_is_its_single_generations_and_bad_batches_are_refused() {
    let dir = Scratch::new("limits", "batch");
    std::fs::write(dir.join("text.txt"), &TINY_SHAKESPEARE[..8_000]).unwrap();
    train(&dir, "text.txt");
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["generate", "--checkpoint", "run", "--max-new-tokens", "6"];
        all.extend_from_slice(args);
        all.extend(["--seed", "7", "--json"]);
        let o = run(&dir, &all);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let batch = json(&["--prompt", "A", "--prompt", "B", "--parallel", "2"]);
    let seqs = batch["sequences"].as_array().unwrap();
    assert_eq!(seqs.len(), 4);
    for (i, s) in seqs.iter().enumerate() {
        let prompt = ["A", "B"][i / 2];
        assert_eq!(
            (s["prompt"].as_str(), s["seed"].as_u64()),
            (Some(prompt), Some(7 + i as u64))
        );
        let seed = (7 + i).to_string();
        let mut all = vec!["generate", "--checkpoint", "run", "--max-new-tokens", "6"];
        all.extend(["--prompt", prompt, "--seed", &seed, "--json"]);
        let o = run(&dir, &all);
        let one: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(s["text"], one["text"], "sequence {i}");
    }
    let generate = |extra: &[&str]| {
        let mut args = vec!["generate", "--checkpoint", "no-such-run", "--prompt", "A"];
        args.extend_from_slice(extra);
        run(&dir, &args)
    };
    refused(
        &generate(&["--parallel", "0"]),
        &["--parallel 0: every prompt needs at least 1 sequence"],
    );
    refused(
        &generate(&["--prompt", "B", "--parallel", "513"]),
        &["2 prompts x --parallel 513 is 1026 sequences", "(1024)"],
    );
    refused(
        &generate(&["--parallel", "2", "--max-new-tokens", "1000000000000"]),
        &["--max-new-tokens 1000000000000 is more than"],
    );
}

#[test]
fn eval_rechecks_the_recorded_text() {
    let dir = Scratch::new("limits", "eval-text");
    let text = &TINY_SHAKESPEARE[..8_000];
    std::fs::write(dir.join("text.txt"), text).unwrap();
    train(&dir, "text.txt");
    let eval = || run(&dir, &["eval", "--checkpoint", "run", "--json"]);
    let o = eval();
    assert!(o.status.success(), "{}", stderr(&o));
    // The same path, another text (one letter changed): not what the model was trained on.
    std::fs::write(dir.join("text.txt"), text.replacen('A', "B", 1)).unwrap();
    refused(
        &eval(),
        &["text.txt", "is not the one checkpoint", "SHA-256 differs"],
    );
    // `--kv-cache` is refused with a checkpoint even at its default.
    refused(
        &run(&dir, &["eval", "--checkpoint", "run", "--kv-cache", "f32"]),
        &["--kv-cache and --dot apply to --model only"],
    );
    refused(
        &run(&dir, &["eval", "--checkpoint", "run", "--dot", "q8"]),
        &["--dot apply to --model only"],
    );
}

#[test]
fn eval_rechecks_the_recorded_token_folder() {
    let dir = Scratch::new("limits", "eval-folder");
    let text = &TINY_SHAKESPEARE[..30_000];
    token_folder(&dir.join("tokens"), text);
    train(&dir, "tokens");
    let eval = || run(&dir, &["eval", "--checkpoint", "run", "--json"]);
    let o = eval();
    assert!(o.status.success(), "{}", stderr(&o));
    // Prepared again from another text, its meta.json true to its files: not the run's data.
    token_folder(&dir.join("tokens"), &TINY_SHAKESPEARE[30_000..60_000]);
    refused(&eval(), &["tokens", "is not the one checkpoint", "SHA-256"]);
}
