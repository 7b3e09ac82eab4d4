//! The bytes of a checkpoint: identical runs write identical files, a
//! resumed run rewrites the metrics log byte for byte, `SHA256SUMS` covers state.json, and
//! every value of state.json is checked on load like the command line checks it (a one-line
//! error, never a panic: `"batch": 0` used to panic in `eval`).

use crate::crash;

use std::path::Path;

use crash::Bench;
use orthoformer::train::checkpoint;

fn ok(o: &std::process::Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn identical_runs_write_identical_files() {
    let bench = Bench::new("same", 3);
    for (tag, extra) in [
        ("char", vec![]),
        ("bpe", vec!["--tokenizer", "bpe", "--vocab-size", "300"]),
    ] {
        let mut outs = Vec::new();
        for i in 0..2 {
            let out = bench.root.join(format!("{tag}{i}"));
            let mut args = bench.train_args(&out, false, None);
            args.extend(extra.iter().map(|s| s.to_string()));
            ok(&bench.run(&args));
            outs.push(out);
        }
        let mut files = vec!["model.safetensors", "optimizer.safetensors", "state.json"];
        if tag == "bpe" {
            files.push("tokenizer.json");
        }
        for f in files {
            assert!(
                read(&outs[0].join(f)) == read(&outs[1].join(f)),
                "{tag}: {f} differs"
            );
        }
        // The metrics differ only in timings and memory.
        let strip = |p: &Path| -> Vec<serde_json::Value> {
            String::from_utf8(read(p))
                .unwrap()
                .lines()
                .map(|l| {
                    let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                    for k in ["tokens_per_s", "ms_per_step", "peak_rss_bytes"] {
                        v.as_object_mut().unwrap().remove(k);
                    }
                    v
                })
                .collect()
        };
        let (a, b) = (outs[0].join("metrics.jsonl"), outs[1].join("metrics.jsonl"));
        assert_eq!(strip(&a), strip(&b), "{tag}");
    }
}

#[test]
fn a_resumed_run_rewrites_the_metrics_byte_for_byte() {
    let bench = Bench::new("metrics", 5);
    let out = bench.root.join("run");
    ok(&bench.run(&bench.train_args(&out, false, Some(3))));
    let before = read(&out.join("metrics.jsonl"));
    assert_eq!(before.iter().filter(|&&b| b == b'\n').count(), 4);
    ok(&bench.run(&bench.train_args(&out, true, None)));
    let after = read(&out.join("metrics.jsonl"));
    assert!(
        after.starts_with(&before),
        "the first 4 records changed on resume:\n{}\n{}",
        String::from_utf8_lossy(&before),
        String::from_utf8_lossy(&after)
    );
    // Read and written again by the library: the same bytes.
    let records = orthoformer::train::metrics::read_jsonl(&out.join("metrics.jsonl")).unwrap();
    let mut again = Vec::new();
    orthoformer::train::metrics::write_records(&mut again, &records).unwrap();
    assert_eq!(again, after);
}

/// Edits `state.json` with `edit`, updating `SHA256SUMS` when `rehash` (a deliberate edit).
fn edit_state(dir: &Path, rehash: bool, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("state.json");
    let mut v: serde_json::Value = serde_json::from_slice(&read(&path)).unwrap();
    edit(&mut v);
    let bytes = serde_json::to_vec_pretty(&v).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    if rehash {
        let sums = String::from_utf8(read(&dir.join("SHA256SUMS"))).unwrap();
        let fixed: String = sums
            .lines()
            .map(|l| match l.split_once("  ") {
                Some((_, "state.json")) => {
                    format!("{}  state.json\n", checkpoint::sha256_hex(&bytes))
                }
                _ => format!("{l}\n"),
            })
            .collect();
        std::fs::write(dir.join("SHA256SUMS"), fixed).unwrap();
    }
}

#[test]
fn state_json_is_hashed_and_validated_like_the_command_line() {
    let bench = Bench::new("state", 4);
    let good = bench.root.join("good");
    ok(&bench.run(&bench.train_args(&good, false, None)));
    let copy = |name: &str| {
        let d = bench.root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        for e in std::fs::read_dir(&good).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
        }
        d
    };
    // A valid-looking edit of an option is caught by the hash.
    for (key, value) in [("weight_decay", 0.05), ("grad_clip", 0.5)] {
        let d = copy(key);
        edit_state(&d, false, |v| {
            let opts = v["options"].as_object_mut().unwrap();
            match key {
                "weight_decay" => opts["adamw"]["weight_decay"] = value.into(),
                _ => opts[key] = value.into(),
            };
        });
        let err = checkpoint::load(&d).unwrap_err().to_string();
        assert!(
            err.contains("state.json is truncated or modified"),
            "{key}: {err}"
        );
    }
    // Edits that keep the hash consistent are validated value by value.
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 8] = [
        (
            "batch",
            |v| v["options"]["batch"] = 0.into(),
            "`batch` must be at least 1",
        ),
        (
            "iters",
            |v| v["options"]["eval_iters"] = 0.into(),
            "`eval_iters`",
        ),
        ("lr", |v| v["options"]["lr"] = (-1.0).into(), "`lr`"),
        ("seq", |v| v["seq_len"] = 0.into(), "seq_len 0"),
        ("seq2", |v| v["seq_len"] = 9.into(), "seq_len 9"),
        ("step", |v| v["step"] = 99.into(), "past the run's 4 steps"),
        ("adam", |v| v["adam_t"] = 3.into(), "step count 3"),
        (
            "heads",
            |v| v["model"]["n_head"] = 3.into(),
            "not divisible by n_head 3",
        ),
    ];
    for (name, edit, want) in cases {
        let d = copy(name);
        edit_state(&d, true, edit);
        let err = checkpoint::load(&d).unwrap_err().to_string();
        assert!(
            err.contains(want) && err.contains("state.json"),
            "{name}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // `eval` of a checkpoint whose state says batch 0: one line and exit 2, no panic.
    let d = bench.root.join("batch");
    let o = bench.run(&[
        "eval".into(),
        "--checkpoint".into(),
        d.display().to_string(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: ") && err.contains("--batch must be at least 1"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // A deleted manifest.
    let d = copy("nosums");
    std::fs::remove_file(d.join("SHA256SUMS")).unwrap();
    let err = checkpoint::load(&d).unwrap_err().to_string();
    assert!(err.contains("SHA256SUMS cannot be read"), "{err}");
    // And the untouched folder still loads.
    assert_eq!(checkpoint::load(&good).unwrap().run.step, 4);
}

#[test]
fn folders_of_the_previous_version_load_and_lose_their_stray_temporaries() {
    let bench = Bench::new("v1", 3);
    let d = bench.root.join("run");
    ok(&bench.run(&bench.train_args(&d, false, None)));
    // As the previous version left it after a kill: hashes in state.json, no SHA256SUMS and
    // no lock file, and the temporary files of its one-file-at-a-time writes.
    let sums = crash::manifest(&d);
    edit_state(&d, false, |v| {
        v["version"] = 1.into();
        v["files"] = sums
            .iter()
            .filter(|(n, _)| *n != "state.json")
            .map(|(n, h)| (n.clone(), serde_json::Value::from(h.clone())))
            .collect::<serde_json::Map<_, _>>()
            .into();
    });
    std::fs::remove_file(d.join("SHA256SUMS")).unwrap();
    std::fs::remove_file(d.join(".checkpoint.lock")).unwrap();
    // Folders of that version had no kind marker either.
    std::fs::remove_file(d.join(".orthoformer")).unwrap();
    for stray in [
        ".model.safetensors.4242.tmp",
        ".state.json.7.tmp",
        ".write-test-99",
    ] {
        std::fs::write(d.join(stray), b"partial").unwrap();
    }
    let loaded = checkpoint::load(&d).unwrap();
    assert_eq!(loaded.run.step, 3);
    assert_eq!(
        crash::entries(&d),
        [
            "metrics.jsonl",
            "model.safetensors",
            "optimizer.safetensors",
            "state.json"
        ]
    );
    // Resumed, it continues and is written in the current format.
    let mut args = bench.train_args(&d, true, None);
    args.extend(["--steps".to_string(), "5".to_string()]);
    ok(&bench.run(&args));
    let loaded = checkpoint::load(&d).unwrap();
    assert_eq!((loaded.run.step, loaded.state_file.version), (5, 2));
    assert!(d.join("SHA256SUMS").is_file());
}

/// A kill while `train` claims its folder leaves the marker's temporary copy
/// (`..orthoformer.PID.tmp`) before any checkpoint exists; the next open removes it, and keeps
/// the copy of a claimer that is still alive.
#[test]
fn a_claim_killed_midway_leaves_no_temporary_after_the_next_open() {
    let d = Bench::new("claim", 1).root.join("run");
    std::fs::create_dir_all(&d).unwrap();
    let live = std::process::id();
    for pid in [crate::common::dead_pid(), live] {
        std::fs::write(d.join(format!("..orthoformer.{pid}.tmp")), b"orthof").unwrap();
    }
    assert!(!checkpoint::exists(&d).unwrap());
    assert_eq!(crash::entries(&d), [format!("..orthoformer.{live}.tmp")]);
}
