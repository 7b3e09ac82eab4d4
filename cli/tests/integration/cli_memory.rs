//! `orthoformer memory` and the peak resident memory of `orthoformer train`, run as the real
//! binary: the command measures child training runs and prints, per
//! variant, the prediction by component beside the measured peak; `train` reports its peak in
//! its JSON summary and in `metrics.jsonl`. Agreement within 10% is the command's own check
//! (exit status 1 when it fails) and is not asserted here: memory depends on the allocator.

use std::path::PathBuf;

use crate::common::run_args as run;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("of-cli-memory-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn memory_measures_every_requested_variant_and_train_reports_its_peak() {
    let dir = temp("tiny");
    let work = dir.join("work");
    let work_s = work.to_string_lossy().into_owned();
    let o = run(&[
        "memory",
        "--configs",
        "tiny",
        "--attention",
        "softmax,orthogonal-linear",
        "--steps",
        "1",
        "--work-dir",
        &work_s,
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    // 0: all rows agree; 1: a row disagrees (the command's own check), never an error.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let rows = v["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["attention"].as_str())
        .collect();
    assert_eq!(names, ["softmax", "orthogonal-linear"]);
    for r in rows {
        let p = &r["predicted"];
        let parts = [
            "weights",
            "gradients",
            "adamw",
            "activations",
            "checkpoint_write",
        ]
        .iter()
        .map(|k| p[k].as_u64().unwrap())
        .sum::<u64>();
        let (base, data, tok) = (
            p["baseline"].as_u64().unwrap(),
            p["data"].as_u64().unwrap(),
            p["data_transient"].as_u64().unwrap(),
        );
        assert_eq!(p["total"].as_u64().unwrap(), base + data + parts.max(tok));
        assert!(parts > 0 && data > 0, "{r}");
        if cfg!(target_os = "linux") {
            let measured = r["measured_bytes"].as_u64().expect("measured on Linux");
            assert!(measured > 1 << 20, "{r}");
            assert!(r["ratio"].as_f64().unwrap() > 0.0);
            assert!(base > 0, "{r}");
        }
    }
    if cfg!(target_os = "linux") {
        assert!(v["baseline"]["idle"].as_u64().unwrap() > 0);
        // The child's own records carry its peak too.
        let metrics = std::fs::read_to_string(work.join("tiny-softmax/metrics.jsonl")).unwrap();
        let last: serde_json::Value =
            serde_json::from_str(metrics.lines().last().unwrap()).unwrap();
        assert!(last["peak_rss_bytes"].as_u64().unwrap() > 0, "{last}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_memory_flags_are_one_clear_error() {
    for (args, needle) in [
        (
            &["memory", "--configs", "z"][..],
            "unknown config \"z\": use a, b or tiny",
        ),
        (&["memory", "--attention", "nope"][..], "unknown attention"),
        (&["memory", "--steps", "0"][..], "--steps"),
        (&["memory", "--tolerance=-1"][..], "--tolerance"),
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn params_reports_its_own_peak_as_the_baseline() {
    let o = run(&["params", "--preset", "config-a", "--batch", "16", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &v["account"]["memory"];
    // Checkpoints stream through one write buffer (io::file_set::WRITE_BUFFER, 64 KiB).
    assert_eq!(m["checkpoint_write"], 1 << 16);
    if cfg!(target_os = "linux") {
        assert!(v["process_peak_rss_bytes"].as_u64().unwrap() > 0);
    }
}
