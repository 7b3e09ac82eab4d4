//! `orthoformer eval --by-position --induction` on a tiny trained checkpoint: the per-position means average back to the loss, the induction probe is finite and
//! reproducible from its seed, and every bad flag is one error line with exit status 2.

use std::path::Path;

use crate::common;
use common::{Scratch, run, stderr};

/// A tiny model (context 32) trained for a few steps in `dir/run`.
fn trained(dir: &Path) {
    let o = run(
        dir,
        &[
            "train",
            "--preset",
            "tiny",
            "--context",
            "32",
            "--batch",
            "4",
            "--steps",
            "12",
            "--warmup",
            "2",
            "--eval-every",
            "12",
            "--eval-iters",
            "1",
            "--out",
            "run",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

fn eval_json(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["eval", "--checkpoint", "run", "--json"];
    args.extend_from_slice(extra);
    let o = run(dir, &args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Exit status 2 and one error line containing `want`.
fn refused(dir: &Path, args: &[&str], want: &str) {
    let o = run(dir, args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: expected {want:?} in {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn probes_on_a_tiny_checkpoint() {
    let dir = Scratch::new("eval-probes", "tiny");
    trained(&dir);
    let plain = eval_json(&dir, &[]);
    assert!(plain.get("by_position").is_none() && plain.get("induction").is_none());
    let v = eval_json(
        &dir,
        &[
            "--by-position",
            "--induction",
            "--induction-sequences",
            "6",
            "--seed",
            "3",
        ],
    );
    // Loss by position: 32 positions whose count-weighted means give the loss.
    let loss = f(&v["report"]["loss"]);
    assert!((loss - f(&plain["report"]["loss"])).abs() < 1e-5 * loss);
    let by = &v["by_position"];
    assert_eq!(by["window"], 32);
    let means = by["loss"].as_array().unwrap();
    let counts = by["tokens"].as_array().unwrap();
    assert_eq!(means.len(), 32);
    let total: f64 = counts.iter().map(f).sum();
    assert_eq!(total, f(&v["report"]["tokens"]));
    let weighted: f64 = means.iter().zip(counts).map(|(m, n)| f(m) * f(n)).sum();
    assert!((weighted / total - loss).abs() < 1e-9 * loss);
    let spans: Vec<(u64, u64)> = by["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["first"].as_u64().unwrap(), b["last"].as_u64().unwrap()))
        .collect();
    assert_eq!(spans, [(1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 32)]);
    // The induction probe: half the context per copy, finite, score = first − second.
    let ind = &v["induction"];
    assert_eq!(
        (ind["len"].as_u64(), ind["sequences"].as_u64()),
        (Some(16), Some(6))
    );
    let (first, second, score) = (
        f(&ind["first"]["mean"]),
        f(&ind["second"]["mean"]),
        f(&ind["score"]["mean"]),
    );
    assert!(first.is_finite() && second.is_finite());
    assert!((score - (first - second)).abs() < 1e-12);
    assert!(f(&ind["score"]["lo"]) <= score && score <= f(&ind["score"]["hi"]));
    // The same seed gives the same numbers; another seed other sequences.
    let again = eval_json(
        &dir,
        &["--induction", "--induction-sequences", "6", "--seed", "3"],
    );
    assert_eq!(again["induction"], v["induction"]);
    let other = eval_json(
        &dir,
        &["--induction", "--induction-sequences", "6", "--seed", "4"],
    );
    assert_ne!(other["induction"]["first"], v["induction"]["first"]);
    // The text form shows both probes.
    let o = run(
        &dir,
        &[
            "eval",
            "--checkpoint",
            "run",
            "--by-position",
            "--induction",
            "--induction-len",
            "4",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("loss by position in the window"), "{text}");
    assert!(text.contains("16-31"), "{text}");
    assert!(text.contains("induction score"), "{text}");
    assert!(text.contains("64 random sequences of 4 tokens"), "{text}");
}

#[test]
fn bad_probe_flags_exit_2_with_one_line() {
    let dir = Scratch::new("eval-probes", "bad");
    trained(&dir);
    let base = ["eval", "--checkpoint", "run"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().chain(extra).copied().collect()
    };
    // Two copies of 17 tokens do not fit a context of 32.
    refused(
        &dir,
        &with(&["--induction", "--induction-len", "17"]),
        "induction length of 17",
    );
    refused(
        &dir,
        &with(&["--induction", "--induction-len", "1"]),
        "induction length of 1",
    );
    refused(
        &dir,
        &with(&["--induction", "--induction-sequences", "1"]),
        "1 induction sequences",
    );
    refused(&dir, &with(&["--induction-len", "4"]), "--induction");
    refused(&dir, &with(&["--seed", "4"]), "--induction");
    refused(
        &dir,
        &with(&["--induction", "--induction-len", "four"]),
        "four",
    );
    refused(
        &dir,
        &["eval", "--model", "nowhere.gguf", "--by-position"],
        "--checkpoint only",
    );
}
