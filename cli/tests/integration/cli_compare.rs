//! `orthoformer compare` run as the real binary on a tiny budget: the table, the two-panel
//! plot and the JSON summary with every seed's figures, paired seeds, the
//! statistics recomputed from the per-seed figures, `--recipe` setting exactly nanoGPT's
//! recipe, a comparison stopped (`--stop-at`, Ctrl-C-like) and resumed giving the same bits as
//! one run straight through, BPE, and clear errors with exit status 2 and no output folder for
//! bad input.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::common;
use common::{Scratch, run, stderr};

fn temp_dir(name: &str) -> Scratch {
    Scratch::new("cli-compare", name)
}

/// The tiny comparison every test starts from, plus `extra`.
fn compare(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "compare",
        "--preset",
        "tiny",
        "--context",
        "32",
        "--batch",
        "4",
        "--steps",
        "6",
        "--eval-every",
        "3",
        "--eval-iters",
        "1",
    ];
    args.extend_from_slice(extra);
    run(dir, &args)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn writes_table_plots_and_summary() {
    let dir = temp_dir("ok");
    let o = compare(&dir, &["--out", "cmp", "--seeds", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8(o.stdout).unwrap();
    for want in [
        "attention",
        "trainable",
        "frozen",
        "ms/step",
        "mean ± sd",
        "95% interval",
        "to softmax's loss",
        "softmax",
        "orthogonal",
        "base",
        "seeds 0, 1",
        "recipe nanogpt-cpu",
    ] {
        assert!(table.contains(want), "{want:?} missing from:\n{table}");
    }
    // The verdict sentence, one of its three forms.
    assert!(
        table.contains("orthogonal is worse than softmax by")
            || table.contains("orthogonal is better than softmax by")
            || table
                .contains("no difference between orthogonal and softmax is detectable at 2 seeds"),
        "{table}"
    );
    let out = dir.join("cmp");
    assert_eq!(
        &std::fs::read(out.join("loss.png")).unwrap()[..4],
        b"\x89PNG"
    );
    let svg = std::fs::read_to_string(out.join("loss.svg")).unwrap();
    assert!(svg.contains("optimizer step") && svg.contains("training seconds"));
    for seed in ["seed-0", "seed-1"] {
        for a in ["softmax", "orthogonal"] {
            assert!(out.join(seed).join(a).join("state.json").is_file());
        }
    }
    // No temporary files left in the output folder.
    let stray: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n != ".orthoformer")
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

/// The JSON schema, and every derived figure recomputed from the per-seed figures it carries.
#[test]
fn json_carries_every_seed_and_the_statistics_follow_from_them() {
    let dir = temp_dir("json");
    let o = compare(
        &dir,
        &["--out", "c", "--seeds", "3", "--seed", "5", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s, read_json(&dir.join("c/summary.json")));
    assert_eq!(s["seeds"], serde_json::json!([5, 6, 7]));
    assert_eq!(s["baseline"], "softmax");
    let vars = s["variants"].as_array().unwrap();
    assert_eq!(vars.len(), 2);
    // The whole validation split: every non-overlapping window of 32 tokens and the shorter
    // last one, so every token after the first.
    let n = orthoformer::data::corpus::TINY_SHAKESPEARE.chars().count();
    let val = n - (n as f64 * 0.9).floor() as usize;
    let whole = val - 1;
    let finals = |v: &Value| -> Vec<f64> {
        v["seeds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| f(&r["final_val_loss"]))
            .collect()
    };
    for v in vars {
        let seeds = v["seeds"].as_array().unwrap();
        assert_eq!(seeds.len(), 3);
        for (r, want_seed) in seeds.iter().zip([5, 6, 7]) {
            assert_eq!(r["seed"], want_seed);
            assert_eq!(r["val_tokens"], whole);
            let curve = r["curve"].as_array().unwrap();
            let steps: Vec<u64> = curve.iter().map(|p| p["step"].as_u64().unwrap()).collect();
            assert_eq!(steps, vec![0, 3, 6]);
            let secs: Vec<f64> = curve.iter().map(|p| f(&p["seconds"])).collect();
            assert!(
                secs[0] == 0.0 && secs[1] > 0.0 && secs[2] > secs[1],
                "{secs:?}"
            );
            assert!((f(&r["train_seconds"]) - secs[2]).abs() < 1e-9);
            assert!(f(&curve[2]["train_loss"]) > 0.0 && f(&curve[2]["val_loss"]) > 0.0);
            assert!(f(&r["ms_per_step"]) > 0.0);
            // Seed s sets the frozen draws: the run's config carries frozen_seed = s.
            let cp = PathBuf::from(r["checkpoint"].as_str().unwrap());
            let st = read_json(&dir.join(&cp).join("state.json"));
            assert_eq!(st["model"]["frozen_seed"], want_seed);
            assert_eq!(st["model_seed"], want_seed);
            assert_eq!(st["options"]["seed"], want_seed);
        }
        let xs = finals(v);
        let m = xs.iter().sum::<f64>() / 3.0;
        let sd = (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 2.0).sqrt();
        assert!((f(&v["val_loss_mean"]) - m).abs() < 1e-12);
        assert!((f(&v["val_loss_sd"]) - sd).abs() < 1e-12);
    }
    let (soft, orth) = (&vars[0], &vars[1]);
    assert!(soft["vs_baseline"].is_null());
    assert_eq!(soft["params_frozen"], 0);
    assert!(orth["params_frozen"].as_u64().unwrap() > 0);
    assert!(orth["params_trainable"].as_u64() < soft["params_trainable"].as_u64());
    // Paired percentages and their t interval (t(0.975, 2) = 4.302653).
    let (a, b) = (finals(soft), finals(orth));
    let pct: Vec<f64> = b.iter().zip(&a).map(|(o, s)| (o - s) / s * 100.0).collect();
    let d = &orth["vs_baseline"];
    for (got, want) in d["per_seed_percent"].as_array().unwrap().iter().zip(&pct) {
        assert!((f(got) - want).abs() < 1e-9);
    }
    let m = pct.iter().sum::<f64>() / 3.0;
    let sd = (pct.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 2.0).sqrt();
    let half = 4.302_652_73 * sd / 3f64.sqrt();
    assert!((f(&d["percent"]["mean"]) - m).abs() < 1e-9);
    assert!((f(&d["percent"]["lo"]) - (m - half)).abs() < 1e-6);
    assert!((f(&d["percent"]["hi"]) - (m + half)).abs() < 1e-6);
    assert_eq!(d["percent"]["n"], 3);
    assert_eq!(s["verdicts"][0], d["verdict"]);
    // The target is softmax's mean last curve point, which softmax reaches at its last step.
    let last = |v: &Value| -> f64 {
        let seeds = v["seeds"].as_array().unwrap();
        seeds
            .iter()
            .map(|r| f(&r["curve"][2]["val_loss"]))
            .sum::<f64>()
            / 3.0
    };
    assert!((f(&s["target_val_loss"]) - last(soft)).abs() < 1e-6);
    assert!((f(&soft["to_target"]["steps"]) - 6.0).abs() < 1e-6);
    let orth_steps = &orth["to_target"]["steps"];
    assert!(
        orth_steps.is_null() || (0.0..=6.0).contains(&f(orth_steps)),
        "{orth_steps}"
    );
}

/// Stopped with --stop-at, then by an interrupted (killed) chunk, then resumed: the same
/// losses, bit for bit, as one comparison run straight through.
#[test]
fn a_stopped_comparison_resumes_where_it_stopped() {
    let dir = temp_dir("resume");
    let whole = compare(&dir, &["--out", "whole", "--seeds", "2", "--json"]);
    assert!(whole.status.success(), "{}", stderr(&whole));
    let o = compare(&dir, &["--out", "part", "--seeds", "2", "--stop-at", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let msg = String::from_utf8(o.stdout).unwrap();
    assert!(
        msg.contains("stopped at step 3 of 6") && msg.contains("--resume"),
        "{msg}"
    );
    assert!(!dir.join("part/summary.json").exists());
    let st = read_json(&dir.join("part/seed-1/orthogonal/state.json"));
    assert_eq!(st["step"], 3);
    // A kill after the first finished run: drop the second seed's checkpoints, as if it had
    // never started, and the record of finished runs, as if the process died before writing it.
    std::fs::remove_dir_all(dir.join("part/seed-1")).unwrap();
    let o = run(
        &dir,
        &["compare", "--resume", "--out", "part", "--stop-at", "6"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(dir.join("part/finals.json")).unwrap();
    // Killed while writing the record or the plan: their copies (of a process that is gone)
    // go on the next resume.
    let dead = crate::common::dead_pid();
    let strays = [".finals.json", ".plan.json"].map(|f| format!("{f}.{dead}.tmp"));
    for s in &strays {
        std::fs::write(dir.join("part").join(s), b"{").unwrap();
    }
    let o = run(&dir, &["compare", "--resume", "--out", "part", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for s in &strays {
        assert!(!dir.join("part").join(s).exists(), "{s} was left");
    }
    let (a, b): (Value, Value) = (
        serde_json::from_slice(&whole.stdout).unwrap(),
        serde_json::from_slice(&o.stdout).unwrap(),
    );
    for (va, vb) in a["variants"]
        .as_array()
        .unwrap()
        .iter()
        .zip(b["variants"].as_array().unwrap())
    {
        for (ra, rb) in va["seeds"]
            .as_array()
            .unwrap()
            .iter()
            .zip(vb["seeds"].as_array().unwrap())
        {
            assert_eq!(ra["final_val_loss"], rb["final_val_loss"]);
            let losses = |r: &Value| -> Vec<Value> {
                r["curve"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["val_loss"].clone())
                    .collect()
            };
            assert_eq!(losses(ra), losses(rb));
        }
    }
    // A finished comparison resumed is only summarised again.
    let again = run(&dir, &["compare", "--resume", "--out", "part"]);
    assert!(again.status.success(), "{}", stderr(&again));
    // Resuming takes its settings from the plan; a new comparison will not overwrite one.
    for (args, want) in [
        (
            vec!["compare", "--resume", "--out", "part", "--steps", "9"],
            "drop every flag",
        ),
        (
            vec!["compare", "--resume", "--out", "nothing-here"],
            "holds no comparison",
        ),
        (vec!["compare", "--resume"], "--resume needs --out"),
        (
            vec!["compare", "--out", "part", "--preset", "tiny"],
            "already holds a comparison",
        ),
    ] {
        let o = run(&dir, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{want:?} not in {}", stderr(&o));
    }
}

/// `--recipe nanogpt-cpu` is nanoGPT's README CPU command, value for value, for `compare`
/// (also its default) and `train`.
#[test]
fn recipe_sets_exactly_nanogpts_cpu_recipe() {
    let dir = temp_dir("recipe");
    let want_model = serde_json::json!({
        "context": 64, "n_layer": 4, "n_head": 4, "d_model": 128, "d_ff": 512,
        "norm": "pre", "attn_bias": false, "ffn_bias": false, "norm_bias": false,
        "gelu": "erf", "dropout": 0.0,
    });
    let want_opts = serde_json::json!({
        "steps": 2000, "batch": 12, "lr": 1e-3, "min_lr": 1e-4, "warmup": 100,
        "grad_clip": 1.0, "eval_every": 250, "eval_iters": 20, "seed": 0,
        "adamw": {"beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.1},
    });
    let check = |model: &Value, opts: &Value, what: &str| {
        for (k, v) in want_model.as_object().unwrap() {
            assert_eq!(&model[k], v, "{what}: model {k}");
        }
        assert_eq!(opts, &want_opts, "{what}: options");
    };
    for (out, extra) in [
        ("named", vec!["--recipe", "nanogpt-cpu"]),
        ("default", vec![]),
    ] {
        let mut args = vec!["compare", "--out", out, "--stop-at", "1", "--seeds", "1"];
        args.extend(extra);
        let o = run(&dir, &args);
        assert!(o.status.success(), "{}", stderr(&o));
        let plan = read_json(&dir.join(out).join("plan.json"));
        assert_eq!(plan["recipe"], "nanogpt-cpu");
        assert_eq!(plan["tokenizer"], "char");
        check(&plan["model"], &plan["options"], out);
        assert_eq!(
            plan["attentions"],
            serde_json::json!(["softmax", "orthogonal"])
        );
    }
    let o = run(
        &dir,
        &[
            "train",
            "--recipe",
            "nanogpt-cpu",
            "--out",
            "t",
            "--stop-at",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let st = read_json(&dir.join("t/state.json"));
    check(&st["model"], &st["options"], "train");
    assert_eq!(st["model"]["vocab_size"], 65);
    // Flags override the recipe.
    let o = run(
        &dir,
        &[
            "compare",
            "--out",
            "w",
            "--width",
            "64",
            "--context",
            "32",
            "--steps",
            "9",
            "--stop-at",
            "1",
            "--seeds",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = read_json(&dir.join("w/plan.json"));
    assert_eq!(plan["model"]["d_model"], 64);
    assert_eq!(plan["model"]["d_ff"], 256);
    assert_eq!(plan["model"]["context"], 32);
    assert_eq!(plan["options"]["steps"], 9);
    assert_eq!(plan["options"]["lr"], 1e-3);
}

#[test]
fn bpe_and_eval_of_a_compared_run() {
    let dir = temp_dir("bpe");
    let text = orthoformer::data::corpus::TINY_SHAKESPEARE[..60_000].to_string();
    std::fs::write(dir.join("text.txt"), text).unwrap();
    let o = compare(
        &dir,
        &[
            "--out",
            "c",
            "--json",
            "--data",
            "text.txt",
            "--tokenizer",
            "bpe",
            "--vocab-size",
            "300",
            "--attention",
            "orthogonal",
            "--seeds",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["tokenizer"], "bpe");
    assert_eq!(s["vocab_size"], 300);
    assert_eq!(s["variants"].as_array().unwrap().len(), 1);
    assert!(s["verdicts"].as_array().unwrap().is_empty());
    assert!(dir.join("c/seed-0/orthogonal/tokenizer.json").is_file());
    let e = run(
        &dir,
        &["eval", "--checkpoint", "c/seed-0/orthogonal", "--json"],
    );
    assert!(e.status.success(), "{}", stderr(&e));
    let v: Value = serde_json::from_slice(&e.stdout).unwrap();
    assert_eq!(v["report"]["unit"], "byte");
    // `eval` scores the same whole validation split as the comparison's final loss.
    let fin = f(&s["variants"][0]["seeds"][0]["final_val_loss"]);
    assert!(
        (f(&v["report"]["loss"]) - fin).abs() < 1e-6,
        "{} vs {fin}",
        v["report"]["loss"]
    );
}

#[test]
fn bad_input_is_a_clear_error_and_leaves_nothing() {
    let dir = temp_dir("bad");
    std::fs::write(dir.join("bin.dat"), b"\0\0\0").unwrap();
    for (extra, want) in [
        (vec!["--attention", "softmax,bogus"], "unknown attention"),
        (vec!["--attention", "softmax,softmax"], "twice"),
        (vec!["--data", "bin.dat"], "looks binary"),
        (vec!["--data", "missing.txt"], "No such file"),
        (vec!["--batch", "0"], "--batch"),
        (vec!["--seeds", "0"], "--seeds"),
        (vec!["--stop-at", "0"], "--stop-at"),
        (vec!["--jobs", "0"], "--jobs must be at least 1"),
        (vec!["--model-seed", "3"], "--model-seed does not apply"),
        (vec!["--recipe", "bogus"], "unknown recipe"),
        (
            vec!["--seed", "18446744073709551615", "--seeds", "2"],
            "overflows",
        ),
    ] {
        let mut args = extra.clone();
        args.extend_from_slice(&["--out", "cmp"]);
        let o = compare(&dir, &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "{want:?} not in {err}");
        assert!(!dir.join("cmp").exists(), "{extra:?} left output");
    }
}

/// `--lr-sweep`: every variant at every rate on the same seeds, each reported at the rate with
/// the lowest held-out *training* loss (never chosen on validation), with the full table in the
/// summary; stopped and resumed like any comparison, and the resumed sweep gives the same bits.
#[test]
fn lr_sweep_chooses_on_the_held_out_training_part_and_resumes() {
    let dir = temp_dir("lr-sweep");
    let sweep = [
        "--seeds",
        "2",
        "--lr-sweep",
        "1e-3,3e-2",
        "--attention",
        "softmax,orthogonal",
    ];
    let o = compare(
        &dir,
        &[&["--out", "s", "--stop-at", "3"], &sweep[..]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("s/seed-1/lr-0.03/orthogonal/state.json").exists());
    let plan = read_json(&dir.join("s/plan.json"));
    assert_eq!(plan["lrs"], serde_json::json!([1e-3, 3e-2]));
    let o = run(&dir, &["compare", "--resume", "--out", "s", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    let cells = s["lr_sweep"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let finals = read_json(&dir.join("s/finals.json"));
    for v in s["variants"].as_array().unwrap() {
        let name = v["attention"].as_str().unwrap();
        let mine: Vec<&Value> = cells.iter().filter(|c| c["attention"] == name).collect();
        // The chosen rate has the lowest mean held-out loss, recomputed from finals.json.
        let held = |c: &Value| -> f64 {
            let lr = f(&c["lr"]);
            (0..2)
                .map(|seed| f(&finals[format!("seed-{seed}/lr-{lr}/{name}")]["held_out_loss"]))
                .sum::<f64>()
                / 2.0
        };
        let best = mine
            .iter()
            .min_by(|a, b| held(a).total_cmp(&held(b)))
            .unwrap();
        assert_eq!(best["chosen"], true, "{name}");
        assert_eq!(v["lr"], best["lr"]);
        assert!((f(&best["held_out_loss_mean"]) - held(best)).abs() < 1e-12);
        // The variant's reported losses are the chosen rate's runs, on the validation split.
        for (seed, r) in v["seeds"].as_array().unwrap().iter().enumerate() {
            let key = format!("seed-{seed}/lr-{}/{name}", f(&best["lr"]));
            assert_eq!(r["final_val_loss"], finals[&key]["val_loss"]);
            // Held-out and validation are different texts: different losses.
            assert_ne!(finals[&key]["val_loss"], finals[&key]["held_out_loss"]);
        }
    }
    // The printed table carries the sweep's rows; a straight run gives the same bits.
    let again = run(&dir, &["compare", "--resume", "--out", "s"]);
    let text = String::from_utf8(again.stdout).unwrap();
    assert!(
        text.contains("Learning-rate sweep") && text.contains("yes"),
        "{text}"
    );
    let whole = compare(&dir, &[&["--out", "w", "--json"], &sweep[..]].concat());
    let w: Value = serde_json::from_slice(&whole.stdout).unwrap();
    assert_eq!(w["lr_sweep"], s["lr_sweep"]);
    // Bad rates and a sweep flag on resume are one-line errors.
    for (args, want) in [
        (vec!["--out", "b1", "--lr-sweep", "1e-3,1e-3"], "twice"),
        (vec!["--out", "b2", "--lr-sweep", "0"], "not a positive"),
    ] {
        let o = compare(&dir, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
        assert!(!dir.join(args[1]).exists());
    }
    let o = run(
        &dir,
        &["compare", "--resume", "--out", "s", "--lr-sweep", "1e-3"],
    );
    assert_eq!(o.status.code(), Some(2));
}

/// `--jobs`: runs training at once are the same bits as one at a time (final losses, curves,
/// checkpoints), also when stopped and resumed with another number of jobs.
#[test]
fn runs_at_once_are_the_same_bits_as_one_at_a_time() {
    let dir = temp_dir("jobs");
    let one = compare(
        &dir,
        &["--out", "one", "--seeds", "2", "--jobs", "1", "--json"],
    );
    assert!(one.status.success(), "{}", stderr(&one));
    let three = compare(&dir, &["--out", "three", "--seeds", "2", "--jobs", "3"]);
    assert!(three.status.success(), "{}", stderr(&three));
    assert!(
        String::from_utf8_lossy(&three.stdout).contains("training 3 runs at once"),
        "{}",
        String::from_utf8_lossy(&three.stdout)
    );
    let part = compare(
        &dir,
        &[
            "--out",
            "part",
            "--seeds",
            "2",
            "--jobs",
            "2",
            "--stop-at",
            "3",
        ],
    );
    assert!(part.status.success(), "{}", stderr(&part));
    let rest = run(
        &dir,
        &[
            "compare", "--resume", "--out", "part", "--jobs", "4", "--json",
        ],
    );
    assert!(rest.status.success(), "{}", stderr(&rest));
    let file = |folder: &str, run: &str, name: &str| {
        std::fs::read(dir.join(folder).join(run).join(name)).unwrap()
    };
    for folder in ["three", "part"] {
        for run in [
            "seed-0/softmax",
            "seed-0/orthogonal",
            "seed-1/softmax",
            "seed-1/orthogonal",
        ] {
            for name in ["model.safetensors", "optimizer.safetensors"] {
                assert!(
                    file("one", run, name) == file(folder, run, name),
                    "{folder}/{run}/{name} differs from the one-at-a-time run's"
                );
            }
        }
        let finals = |f: &str| read_json(&dir.join(f).join("finals.json"));
        let (a, b) = (finals("one"), finals(folder));
        for (key, v) in a.as_object().unwrap() {
            assert_eq!(v["val_loss"], b[key]["val_loss"], "{folder} {key}");
        }
    }
    let summary: Value = serde_json::from_slice(&rest.stdout).unwrap();
    let whole: Value = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(summary["verdicts"], whole["verdicts"]);
}

/// Ctrl-C while two runs train at once: both checkpoint, the error says how to continue, and
/// the comparison resumes from there.
#[test]
fn ctrl_c_stops_every_run_training_at_once_with_a_checkpoint() {
    let dir = temp_dir("jobs-ctrlc");
    let args = [
        "compare",
        "--preset",
        "tiny",
        "--context",
        "32",
        "--batch",
        "4",
        "--eval-iters",
        "1",
        "--steps",
        "1000000",
        "--eval-every",
        "5",
        "--seeds",
        "1",
        "--jobs",
        "2",
        "--out",
        "cmp",
    ];
    let states =
        ["softmax", "orthogonal"].map(|a| dir.join("cmp/seed-0").join(a).join("state.json"));
    let o = common::interrupt_when_ready(&dir, &args, &states);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(75), "{err}");
    assert!(
        err.contains("interrupted at step") && err.contains("compare --resume --out"),
        "{err}"
    );
    let step = |s: &PathBuf| read_json(s)["step"].as_u64().unwrap();
    let last = states.iter().map(step).max().unwrap();
    let stop = (last + 2).to_string();
    let again = run(
        &dir,
        &[
            "compare",
            "--resume",
            "--out",
            "cmp",
            "--stop-at",
            &stop,
            "--jobs",
            "2",
        ],
    );
    assert!(again.status.success(), "{}", stderr(&again));
    for s in &states {
        assert_eq!(step(s), last + 2, "{}", s.display());
    }
}
