//! The learning rate's decay horizon (`--lr-decay-steps`): a resumed run
//! with more `--steps` keeps the first run's cosine, so the rate goes on at `--min-lr` instead
//! of jumping back up; a horizon may be set on a fresh run, named again on resume but never
//! changed there, and a bad one is one clear error line.

use std::path::Path;
use std::process::Output;

use crate::common;
use common::{Scratch, run, stderr};

const MIN_LR: f64 = 1e-4;

/// A tiny run evaluated after every step, so the metrics log gives every step's rate.
fn train(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "train",
        "--preset",
        "tiny",
        "--context",
        "16",
        "--batch",
        "2",
        "--eval-iters",
        "1",
        "--eval-every",
        "1",
        "--warmup",
        "2",
        "--lr",
        "3e-3",
        "--min-lr",
        "1e-4",
        "--out",
        "run",
    ];
    args.extend_from_slice(extra);
    run(dir, &args)
}

fn resume(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["train", "--out", "run", "--resume"];
    args.extend_from_slice(extra);
    run(dir, &args)
}

/// The rate of each step `1..` (the record of step `k` holds the rate of its last step).
fn rates(dir: &Path) -> Vec<f64> {
    std::fs::read_to_string(dir.join("run/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["step"].as_u64() != Some(0))
        .map(|v| v["lr"].as_f64().unwrap())
        .collect()
}

fn saved_options(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("run/state.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["options"].clone()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", stderr(o));
}

#[test]
fn resuming_with_more_steps_keeps_the_first_runs_cosine() {
    let dir = Scratch::new("lr-decay", "extend");
    ok(&train(&dir, &["--steps", "20"]));
    // A run that names no horizon is written as before the field existed.
    assert!(saved_options(&dir).get("lr_decay_steps").is_none());
    ok(&resume(&dir, &["--steps", "40"]));
    let lr = rates(&dir);
    assert_eq!(lr.len(), 40, "{lr:?}");
    assert!(lr[19] > MIN_LR && lr[19] < lr[18], "step 20: {lr:?}");
    assert!(lr[20] <= lr[19], "the rate rose on resume: {lr:?}");
    for (i, r) in lr.iter().enumerate().skip(20) {
        assert_eq!(*r, MIN_LR, "step {}: {lr:?}", i + 1);
    }
    assert_eq!(saved_options(&dir)["lr_decay_steps"], 20);
    // Named again unchanged it is accepted; changed it is refused in one line.
    ok(&resume(&dir, &["--steps", "41", "--lr-decay-steps", "20"]));
    let o = resume(&dir, &["--steps", "42", "--lr-decay-steps", "30"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: ")
            && err.contains("decays the learning rate over 20 steps")
            && err.contains("drop --lr-decay-steps 30")
            && err.trim_end().lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_fresh_run_decays_over_the_horizon_it_names() {
    let dir = Scratch::new("lr-decay", "fresh");
    ok(&train(&dir, &["--steps", "12", "--lr-decay-steps", "8"]));
    let lr = rates(&dir);
    assert_eq!(lr.len(), 12);
    assert!(lr[6] > MIN_LR, "{lr:?}");
    assert!(lr[8..].iter().all(|&r| r == MIN_LR), "{lr:?}");
    assert_eq!(saved_options(&dir)["lr_decay_steps"], 8);
    // Extending it keeps the horizon it was given.
    ok(&resume(&dir, &["--steps", "14"]));
    assert_eq!(saved_options(&dir)["lr_decay_steps"], 8);
}

#[test]
fn a_horizon_shorter_than_the_warm_up_is_one_clear_error() {
    let dir = Scratch::new("lr-decay", "bad");
    for d in ["0", "1"] {
        let o = train(&dir, &["--steps", "12", "--lr-decay-steps", d]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.starts_with(&format!("error: --lr-decay-steps {d} must be at least 1"))
                && err.contains("--warmup")
                && err.trim_end().lines().count() == 1,
            "{err}"
        );
        assert!(!dir.join("run").exists());
    }
}
