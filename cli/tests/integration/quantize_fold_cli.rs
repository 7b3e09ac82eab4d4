//! `quantize --rotate identity` through the binary: one
//! configuration with its baselines, the `--table` column beside the Hadamard grid, and
//! `rotate`, which has no identity output, refusing it in one line.

use crate::common::{Scratch, run, stderr};
use crate::models as common;

use serde_json::Value;

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The tiny model and a text it tokenizes, in a fresh folder.
fn setup(name: &str) -> Scratch {
    let dir = Scratch::new("quantize_fold_cli", name);
    common::tiny_llama::write_tiny(&dir.join("tiny.gguf"), None);
    std::fs::write(
        dir.join("t.txt"),
        "abc ab cab ba cc ab abc a b c ".repeat(6),
    )
    .unwrap();
    dir
}

const STUDY: [&str; 12] = [
    "quantize",
    "--model",
    "tiny.gguf",
    "--data",
    "t.txt",
    "--context",
    "12",
    "--calib-tokens",
    "16",
    "--seed",
    "0,1",
    "--json",
];

fn configs(r: &Value) -> Vec<&str> {
    r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["config"].as_str().unwrap())
        .collect()
}

/// The folded unquantised model scores the original's perplexity (1e-4 relative: f32
/// rounding of `W·γ`), and the folded rows run once whatever the seeds.
#[test]
fn identity_runs_with_its_baselines() {
    let dir = setup("one");
    let mut args = STUDY.to_vec();
    args.extend([
        "--rotate", "identity", "--wbits", "4", "--method", "rtn,gptq",
    ]);
    let r = json(&run(&dir, &args));
    assert_eq!(
        configs(&r),
        ["FP", "FP + fold", "W4A16 RTN + fold", "W4A16 GPTQ + fold"],
        "{r}"
    );
    let rows = r["rows"].as_array().unwrap();
    let ppl = |i: usize| rows[i]["ppl"][0].as_f64().unwrap();
    assert!((ppl(1) / ppl(0) - 1.0).abs() < 1e-4, "{r}");
    for row in &rows[1..] {
        assert_eq!(row["rotations"]["residual"], "identity", "{row}");
        assert_eq!(row["by_seed"].as_array().unwrap().len(), 1, "{row}");
    }
}

/// `--table --rotate identity`: the fold column sits beside none, R1 and R1-R4 (Hadamard),
/// with every width of the grid.
#[test]
fn the_table_gets_a_fold_column() {
    let dir = setup("table");
    let mut args = STUDY.to_vec();
    args.extend(["--table", "--rotate", "identity"]);
    let r = json(&run(&dir, &args));
    let names = configs(&r);
    assert_eq!(names.len(), 4 + 4 * 5, "{names:?}");
    for want in [
        "FP + fold",
        "W4A16 RTN + fold",
        "W4A4KV4 RTN + fold",
        "W4A16 RTN + R1",
    ] {
        assert!(names.contains(&want), "{want}: {names:?}");
    }
    let rows = r["rows"].as_array().unwrap();
    let seeds = |name: &str| {
        let row = rows.iter().find(|x| x["config"] == name).unwrap();
        row["by_seed"].as_array().unwrap().len()
    };
    assert_eq!((seeds("W4A16 RTN + fold"), seeds("W4A16 RTN + R1")), (1, 2));
}

#[test]
fn rotate_refuses_identity_in_one_line() {
    let dir = setup("rotate");
    let o = run(
        &dir,
        &[
            "rotate",
            "--model",
            "tiny.gguf",
            "--rotation",
            "identity",
            "--check",
        ],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("identity") && e.trim_end().lines().count() == 1,
        "{e}"
    );
}
