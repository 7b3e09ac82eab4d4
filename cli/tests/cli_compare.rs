//! `orthoformer compare` run as the real binary on a tiny budget: the table, the PNG and SVG
//! plots and the JSON summary, equal budgets across variants, `--json`, BPE, and clear errors
//! with exit status 2 and no output folder for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_orthoformer");

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("of-cli-compare-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn compare(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "compare",
        "--preset",
        "tiny",
        "--context",
        "32",
        "--batch",
        "4",
    ];
    args.extend_from_slice(&["--steps", "6", "--eval-every", "3", "--eval-iters", "1"]);
    args.extend_from_slice(extra);
    Command::new(BIN)
        .args(&args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn writes_table_plots_and_summary() {
    let dir = temp("ok");
    let o = compare(&dir, &["--out", "cmp"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8(o.stdout).unwrap();
    for want in [
        "attention",
        "trainable",
        "frozen",
        "tok/s",
        "val gap",
        "softmax",
        "orthogonal",
        "base",
    ] {
        assert!(table.contains(want), "{want:?} missing from:\n{table}");
    }
    let out = dir.join("cmp");
    assert_eq!(
        &std::fs::read(out.join("loss.png")).unwrap()[..4],
        b"\x89PNG"
    );
    assert!(
        std::fs::read_to_string(out.join("loss.svg"))
            .unwrap()
            .contains("<svg")
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["baseline"], "softmax");
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let (soft, orth) = (&runs[0], &runs[1]);
    assert_eq!(soft["params_frozen"], 0);
    assert!(orth["params_frozen"].as_u64().unwrap() > 0);
    assert!(orth["params_trainable"].as_u64() < soft["params_trainable"].as_u64());
    // Equal budget: the same steps and evaluation points for every variant.
    let steps = |r: &serde_json::Value| {
        r["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["step"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(steps(soft), vec![0, 3, 6]);
    assert_eq!(steps(soft), steps(orth));
    // Same initial batches and data: the step-0 losses come from the same evaluation windows.
    for r in runs {
        assert!(
            out.join(r["attention"].as_str().unwrap())
                .join("state.json")
                .is_file()
        );
    }
    // No temporary files left in the output folder.
    let stray: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_summary_and_bpe() {
    let dir = temp("json");
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
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["tokenizer"], "bpe");
    assert_eq!(s["vocab_size"], 300);
    assert_eq!(s["runs"].as_array().unwrap().len(), 1);
    assert!(dir.join("c/orthogonal/tokenizer.json").is_file());
    let e = Command::new(BIN)
        .args(["eval", "--checkpoint", "c/orthogonal", "--json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(e.status.success(), "{}", stderr(&e));
    let v: serde_json::Value = serde_json::from_slice(&e.stdout).unwrap();
    assert_eq!(v["report"]["unit"], "byte");
    assert!(v["report"]["bits_per_unit"].as_f64().unwrap() > 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_a_clear_error_and_leaves_nothing() {
    let dir = temp("bad");
    std::fs::write(dir.join("bin.dat"), b"\0\0\0").unwrap();
    for (extra, want) in [
        (vec!["--attention", "softmax,bogus"], "unknown attention"),
        (vec!["--attention", "softmax,softmax"], "twice"),
        (vec!["--data", "bin.dat"], "looks binary"),
        (vec!["--data", "missing.txt"], "No such file"),
        (vec!["--batch", "0"], "--batch"),
    ] {
        let mut args = extra.clone();
        args.extend_from_slice(&["--out", "cmp"]);
        let o = compare(&dir, &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "{want:?} not in {err}");
        assert!(!dir.join("cmp").exists(), "{extra:?} left output");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
