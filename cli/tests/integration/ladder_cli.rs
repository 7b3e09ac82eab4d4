//! `orthoformer ladder` end to end on a tiny token folder written here (a
//! BPE trained by the library on the start of TinyShakespeare, by `common::token_folder`)
//! with `assets/ladder/smoke.json`: 2 rungs × 2 variants × 2 seeds × 4 rates, a
//! few steps each. Every `result.json` holds the documented fields; the report and plots are
//! written; a ladder stopped with `--stop-at` and resumed (at other `--jobs`) gives the same
//! results as one run straight through, and so does one handed on as its finished runs'
//! `result.json` alone; `--report-only --partial` reports the finished rungs, and a report
//! needs no token folder; bad plans and changed data are one line, exit 2.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use crate::common::{Scratch, run, stderr, token_folder};
use orthoformer::data::corpus::TINY_SHAKESPEARE;

const SMOKE: &str = include_str!("../../../assets/ladder/smoke.json");

/// Exit status 2 and one error line containing `want`.
fn assert_refused(o: &Output, want: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(want), "expected {want:?} in: {err}");
}

fn ok(o: &Output) {
    assert!(o.status.success(), "stderr: {}", stderr(o));
}

/// Every `result.json` under `out`, by folder, with the engine's timings and device taken
/// out (the only values a second run may change).
fn results(out: &Path) -> BTreeMap<String, serde_json::Value> {
    let mut found = BTreeMap::new();
    let mut stack = vec![out.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "result.json") {
                let mut v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                let o = v.as_object_mut().unwrap();
                o.remove("seconds");
                o.remove("device");
                for point in o["curve"].as_array_mut().unwrap() {
                    point.as_object_mut().unwrap().remove("seconds");
                }
                found.insert(p.strip_prefix(out).unwrap().display().to_string(), v);
            }
        }
    }
    found
}

#[test]
fn a_smoke_ladder_runs_resumes_identically_and_refuses_bad_plans() {
    let dir = Scratch::new("ladder", "smoke");
    token_folder(&dir.join("tokens"), &TINY_SHAKESPEARE[..30_000]);
    std::fs::write(dir.join("plan.json"), SMOKE).unwrap();

    // Straight through, one run at a time.
    ok(&run(
        &dir,
        &[
            "ladder",
            "--plan",
            "plan.json",
            "--out",
            "full",
            "--jobs",
            "1",
            "--json",
        ],
    ));
    let full = results(&dir.join("full"));
    // 2 rungs × 2 variants × 2 seeds × 4 rates, and each rung × variant may add one rate.
    assert!((32..=40).contains(&full.len()), "{} results", full.len());
    let fields = [
        "format",
        "version",
        "engine",
        "rung",
        "variant",
        "seed",
        "lr",
        "params",
        "steps",
        "tokens",
        "flops_per_step",
        "flops",
        "heldout_loss",
        "val_loss",
        "transfer_loss",
        "curve",
    ];
    for (path, r) in &full {
        for f in fields {
            assert!(r.get(f).is_some(), "{path} lacks {f}");
        }
        assert_eq!(r["engine"], "orthoformer-cpu");
        assert!(r["heldout_loss"].as_f64().unwrap() > 0.0);
        let curve = r["curve"].as_array().unwrap();
        assert_eq!(curve[0]["step"], 0);
        assert_eq!(curve.last().unwrap()["step"], r["steps"]);
        for k in [
            "total",
            "trainable",
            "non_embedding",
            "trainable_non_embedding",
        ] {
            assert!(r["params"][k].as_u64().unwrap() > 0, "{path} params.{k}");
        }
    }
    for f in [
        "report.json",
        "report.md",
        "loss-params.png",
        "loss-params.svg",
        "loss-flops.png",
        "loss-flops.svg",
        "loss-rate.png",
        "loss-rate.svg",
    ] {
        assert!(dir.join("full").join(f).is_file(), "{f} missing");
    }
    // The rate plot draws every selection's rates: one panel per rung, named.
    let rate_svg = std::fs::read_to_string(dir.join("full/loss-rate.svg")).unwrap();
    let rungs = report_rungs(&dir.join("full/report.json"));
    assert!(
        rungs.iter().all(|g| rate_svg.contains(g.as_str())),
        "{rungs:?}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("full/report.json")).unwrap())
            .unwrap();
    assert_eq!(report["selection"].as_array().unwrap().len(), 4);
    assert_eq!(report["readings"].as_array().unwrap().len(), 2);
    assert_eq!(report["points"].as_array().unwrap().len(), 8);

    // Validation on windows spread over the whole split: every run scores it as it finishes;
    // `--spread-validation` scores a run that lacks it from its saved model.
    let spread_files: Vec<_> = full
        .keys()
        .map(|k| {
            dir.join("full")
                .join(k)
                .with_file_name("validation-spread.json")
        })
        .collect();
    assert!(spread_files.iter().all(|p| p.is_file()));
    let kept = std::fs::read(&spread_files[0]).unwrap();
    std::fs::remove_file(&spread_files[0]).unwrap();
    let spread = run(
        &dir,
        &["ladder", "--out", "full", "--spread-validation", "--json"],
    );
    ok(&spread);
    let s: serde_json::Value = serde_json::from_slice(&spread.stdout).unwrap();
    assert_eq!(
        (s["scored"].as_u64(), s["kept"].as_u64()),
        (Some(1), Some(full.len() as u64 - 1)),
        "{s}"
    );
    // Scored again from the checkpoint: the very bits the run wrote as it finished.
    assert_eq!(std::fs::read(&spread_files[0]).unwrap(), kept);
    ok(&run(
        &dir,
        &["ladder", "--out", "full", "--report-only", "--json"],
    ));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("full/report.json")).unwrap())
            .unwrap();
    for x in report["readings"].as_array().unwrap() {
        let v = &x["validation_spread"];
        assert!(v["mean"].as_f64().unwrap().is_finite(), "{x}");
        assert_eq!(v["per_seed"].as_array().unwrap().len(), 2);
        // Another set of windows: not the first-slice reading again.
        assert_ne!(v["mean"], x["validation"]["mean"]);
    }
    assert!(
        std::fs::read_to_string(dir.join("full/report.md"))
            .unwrap()
            .contains("spread over the split")
    );
    // A score of another run is refused by name, never read as this one's.
    let one = full
        .keys()
        .map(|k| {
            dir.join("full")
                .join(k)
                .with_file_name("validation-spread.json")
        })
        .find(|p| p.is_file())
        .unwrap();
    let text = std::fs::read_to_string(&one).unwrap();
    std::fs::write(
        &one,
        text.replace("\"spec_sha256\": \"", "\"spec_sha256\": \"0"),
    )
    .unwrap();
    assert_refused(
        &run(&dir, &["ladder", "--out", "full", "--report-only"]),
        "is not the spread validation of this run",
    );
    std::fs::write(&one, text).unwrap();
    assert_refused(
        &run(
            &dir,
            &[
                "ladder",
                "--out",
                "full",
                "--spread-validation",
                "--jobs",
                "2",
            ],
        ),
        "--spread-validation takes --out",
    );

    // Stopped after 2 steps of every run, then resumed two at a time: the same results.
    let stopped = run(
        &dir,
        &[
            "ladder",
            "--plan",
            "plan.json",
            "--out",
            "part",
            "--stop-at",
            "2",
            "--jobs",
            "2",
        ],
    );
    ok(&stopped);
    assert!(String::from_utf8_lossy(&stopped.stdout).contains("stopped"));
    assert!(results(&dir.join("part")).len() < 32);
    ok(&run(
        &dir,
        &[
            "ladder", "--out", "part", "--resume", "--jobs", "2", "--json",
        ],
    ));
    assert_eq!(results(&dir.join("part")), full);
    // The report alone, again.
    ok(&run(
        &dir,
        &["ladder", "--out", "part", "--report-only", "--json"],
    ));

    // A result whose counts are not the run's, or a plan edited after its runs finished, is
    // refused naming the file, not reported.
    let some = full.keys().next().unwrap().clone();
    let file = dir.join("part").join(&some);
    let kept = std::fs::read_to_string(&file).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&kept).unwrap();
    v["flops"] = serde_json::json!(v["flops"].as_u64().unwrap() + 1);
    std::fs::write(&file, v.to_string()).unwrap();
    assert_refused(
        &run(&dir, &["ladder", "--out", "part", "--report-only"]),
        "FLOPs per step",
    );
    std::fs::write(&file, &kept).unwrap();
    let plan_file = dir.join("part/ladder.json");
    let plan_kept = std::fs::read_to_string(&plan_file).unwrap();
    let mut p: serde_json::Value = serde_json::from_str(&plan_kept).unwrap();
    p["weight_decay"] = serde_json::json!(p["weight_decay"].as_f64().unwrap() + 0.05);
    std::fs::write(&plan_file, p.to_string()).unwrap();
    assert_refused(
        &run(&dir, &["ladder", "--out", "part", "--report-only"]),
        "under other settings than the plan's now",
    );
    std::fs::write(&plan_file, &plan_kept).unwrap();

    // A ladder handed on as its plan and finished runs' result.json only (no checkpoints),
    // one run of rung b missing: the full report is refused, the partial one reports rung a
    // alone, and --resume trains the missing run alone, to the same results.
    let half = dir.join("half");
    std::fs::create_dir_all(&half).unwrap();
    std::fs::copy(dir.join("full/ladder.json"), half.join("ladder.json")).unwrap();
    let missing = full.keys().rfind(|k| k.starts_with("b/")).unwrap().clone();
    for path in full.keys().filter(|k| **k != missing) {
        let to = half.join(path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(dir.join("full").join(path), to).unwrap();
    }
    assert_refused(
        &run(&dir, &["ladder", "--out", "half", "--report-only"]),
        "1 of the ladder's runs are unfinished",
    );
    assert_refused(
        &run(&dir, &["ladder", "--out", "half", "--partial"]),
        "--partial goes with --report-only",
    );
    let partial = run(
        &dir,
        &[
            "ladder",
            "--out",
            "half",
            "--report-only",
            "--partial",
            "--json",
        ],
    );
    ok(&partial);
    let partial: serde_json::Value = serde_json::from_slice(&partial.stdout).unwrap();
    assert_eq!(partial["unfinished"], serde_json::json!(["b"]));
    let rungs: Vec<&str> = partial["selection"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rung"].as_str().unwrap())
        .collect();
    assert_eq!(rungs, ["a", "a"]);
    assert!(
        std::fs::read_to_string(half.join("report.md"))
            .unwrap()
            .contains("Partial report")
    );
    ok(&run(
        &dir,
        &[
            "ladder", "--out", "half", "--resume", "--jobs", "1", "--json",
        ],
    ));
    assert_eq!(results(&half), full);

    // Bad plans: one line, exit 2.
    let bad = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(SMOKE).unwrap();
        edit(&mut v);
        std::fs::write(dir.join(name), v.to_string()).unwrap();
        run(
            &dir,
            &["ladder", "--plan", name, "--out", &format!("out-{name}")],
        )
    };
    let o = bad("unknown.json", &|v| {
        v["learning_rate"] = 1.0.into();
    });
    assert_refused(&o, "unknown field \"learning_rate\"");
    let o = bad("three.json", &|v| {
        v["lrs"] = serde_json::json!([0.001, 0.003, 0.01]);
    });
    assert_refused(&o, "lists 3 rates");
    let o = bad("order.json", &|v| {
        v["rungs"].as_array_mut().unwrap().reverse();
    });
    assert_refused(&o, "smallest first");
    // A rung that cannot train on this machine is refused before anything is written.
    let o = bad("huge.json", &|v| {
        v["rungs"][1]["layers"] = 1_000_000_000u64.into();
    });
    assert_refused(&o, "would need");
    assert!(!dir.join("out-huge.json").exists());
    assert_refused(
        &run(&dir, &["ladder", "--out", "nowhere", "--resume"]),
        "holds no ladder",
    );

    // Changed data: refused on resume.
    token_folder(&dir.join("tokens"), &TINY_SHAKESPEARE[1_000..31_000]);
    assert_refused(
        &run(&dir, &["ladder", "--out", "part", "--resume"]),
        "changed since it started",
    );
    // A report reads the plan and the result files only: with the changed data it is
    // refused like a resume, and with no data at all (a ladder handed on without its token
    // folder) it is written.
    assert_refused(
        &run(&dir, &["ladder", "--out", "part", "--report-only"]),
        "changed since it started",
    );
    std::fs::remove_dir_all(dir.join("tokens")).unwrap();
    ok(&run(
        &dir,
        &["ladder", "--out", "part", "--report-only", "--json"],
    ));
    assert_refused(
        &run(&dir, &["ladder", "--out", "part", "--resume"]),
        "tokens",
    );

    // A token file that is a FIFO (or a link to a device) is refused, not read forever.
    #[cfg(unix)]
    {
        token_folder(&dir.join("fifo"), &TINY_SHAKESPEARE[..30_000]);
        std::fs::remove_file(dir.join("fifo/val.bin")).unwrap();
        let c = std::ffi::CString::new(dir.join("fifo/val.bin").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let o = bad("fifo.json", &|v| {
            v["data"] = "fifo".into();
        });
        assert_refused(&o, "val.bin");
    }
}

/// The rung names of a ladder report.
fn report_rungs(path: &std::path::Path) -> Vec<String> {
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    r["plan"]["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect()
}

/// A rate no run can take diverges: the run is recorded as diverged (scored as chance), the
/// ladder finishes, the report names the run, and no reading uses it.
#[test]
fn a_diverging_rate_is_recorded_and_the_ladder_finishes() {
    let dir = Scratch::new("ladder", "diverge");
    token_folder(&dir.join("tokens"), &TINY_SHAKESPEARE[..30_000]);
    let mut plan: serde_json::Value = serde_json::from_str(SMOKE).unwrap();
    plan["lrs"] = serde_json::json!([0.001, 0.003, 0.01, 1e30]);
    plan["extend"] = serde_json::json!(0);
    std::fs::write(dir.join("plan.json"), plan.to_string()).unwrap();
    let o = run(
        &dir,
        &["ladder", "--plan", "plan.json", "--out", "d", "--json"],
    );
    ok(&o);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let diverged = report["diverged"].as_array().unwrap();
    // 2 rungs × 2 variants × 2 seeds at the rate no run takes.
    assert_eq!(diverged.len(), 8, "{report}");
    assert!(
        diverged.iter().all(|d| d
            .as_str()
            .unwrap()
            .contains("lr 1000000000000000000000000000000")),
        "{diverged:?}"
    );
    for s in report["selection"].as_array().unwrap() {
        assert!(s["chosen_lr"].as_f64().unwrap() < 1.0, "{s}");
    }
    let results = results(&dir.join("d"));
    let bad: Vec<_> = results
        .values()
        .filter(|r| r.get("diverged").is_some())
        .collect();
    assert_eq!(bad.len(), 8);
    let chance = (
        bad[0]["params"]["total"].as_f64().is_some(),
        bad[0]["val_loss"].as_f64().unwrap(),
    );
    assert!(chance.0 && chance.1 > 5.0, "{chance:?}");
    assert!(
        std::fs::read_to_string(dir.join("d/report.md"))
            .unwrap()
            .contains("Diverged runs")
    );
}
