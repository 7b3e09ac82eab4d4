//! Which frozen form on the command line: `--frozen-method gaussian`,
//! `--n-head`, `--frozen-layers` and `--freeze-qk-after` on `train` (and through the shared
//! flag groups on `compare`), stored in the checkpoint, resumed exactly, and every bad value
//! one line with exit 2.

use std::path::Path;
use std::process::Output;

use crate::common;
use common::{Scratch, run, stderr};

fn train(dir: &Path, out: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "train",
        "--preset",
        "tiny",
        "--context",
        "8",
        "--batch",
        "2",
        "--eval-iters",
        "1",
        "--eval-every",
        "2",
        "--warmup",
        "1",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    run(dir, &args)
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", stderr(o));
}

fn one_line_exit_2(o: &Output, want: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains(want) && e.trim().lines().count() == 1, "{e}");
}

fn state(dir: &Path, run: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join(run).join("state.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_gaussian_model_frozen_in_some_layers_trains_and_its_checkpoint_keeps_both() {
    let dir = Scratch::new("frozen-form", "gaussian");
    let flags = [
        "--attention",
        "orthogonal",
        "--frozen-method",
        "gaussian",
        "--frozen-layers",
        "last:1",
        "--steps",
        "2",
    ];
    ok(&train(&dir, "run", &flags));
    let model = state(&dir, "run")["model"].clone();
    assert_eq!(model["frozen_method"], "gaussian");
    assert_eq!(model["frozen_layers"], serde_json::json!([1]));
    // Resumed with the same flags named again it continues; with others it is refused.
    ok(&run(
        &dir,
        &[
            "train",
            "--out",
            "run",
            "--resume",
            "--steps",
            "4",
            "--frozen-layers",
            "1",
        ],
    ));
    let o = run(
        &dir,
        &["train", "--out", "run", "--resume", "--frozen-method", "qr"],
    );
    one_line_exit_2(
        &o,
        "frozen_method is \"gaussian\" in the checkpoint but \"qr\" was asked",
    );
}

#[test]
fn bad_head_counts_layers_and_draws_are_one_line_each() {
    let dir = Scratch::new("frozen-form", "bad");
    one_line_exit_2(
        &train(&dir, "a", &["--n-head", "3"]),
        "does not divide the width 8",
    );
    one_line_exit_2(
        &train(&dir, "b", &["--n-head", "0"]),
        "does not divide the width 8",
    );
    one_line_exit_2(
        &train(
            &dir,
            "c",
            &["--attention", "orthogonal", "--frozen-layers", "first:3"],
        ),
        "fewer than the 3",
    );
    one_line_exit_2(
        &train(
            &dir,
            "d",
            &["--attention", "orthogonal", "--frozen-layers", "1,0"],
        ),
        "ascending",
    );
    // An option the variant would ignore (the run bit-identical to the default while its
    // state recorded the option) is refused, naming the option.
    one_line_exit_2(
        &train(
            &dir,
            "g",
            &[
                "--attention",
                "orthogonal-hadamard",
                "--frozen-method",
                "gaussian",
            ],
        ),
        "--frozen-method gaussian changes how",
    );
    one_line_exit_2(
        &train(
            &dir,
            "h",
            &["--attention", "softmax", "--frozen-layers", "first:1"],
        ),
        "--frozen-layers",
    );
    let o = train(&dir, "e", &["--frozen-method", "normal"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("gaussian"), "{}", stderr(&o));
    for out in ["a", "b", "c", "d", "e", "g", "h"] {
        assert!(!dir.join(out).exists(), "{out} was written");
    }
    ok(&train(&dir, "f", &["--n-head", "4", "--steps", "1"]));
    assert_eq!(state(&dir, "f")["model"]["n_head"], 4);
}

/// A run stopped past the freeze step and resumed ends with the same bits as one that was
/// never stopped; the option is stored, and compare names the variant by it.
#[test]
fn freezing_q_and_k_after_a_step_resumes_exactly_and_compare_names_it() {
    let dir = Scratch::new("frozen-form", "freeze");
    let flags = ["--freeze-qk-after", "2", "--steps", "5"];
    ok(&train(&dir, "whole", &flags));
    let mut stop = flags.to_vec();
    stop.extend(["--stop-at", "3"]);
    ok(&train(&dir, "parts", &stop));
    ok(&run(&dir, &["train", "--out", "parts", "--resume"]));
    assert_eq!(state(&dir, "parts")["options"]["freeze_qk_after"], 2);
    for file in ["model.safetensors", "optimizer.safetensors"] {
        let (a, b) = (
            std::fs::read(dir.join("whole").join(file)).unwrap(),
            std::fs::read(dir.join("parts").join(file)).unwrap(),
        );
        assert!(
            a == b,
            "{file} differs between the whole and the resumed run"
        );
    }
    let o = run(
        &dir,
        &[
            "compare",
            "--preset",
            "tiny",
            "--context",
            "8",
            "--batch",
            "2",
            "--steps",
            "3",
            "--eval-every",
            "3",
            "--eval-iters",
            "1",
            "--seeds",
            "1",
            "--attention",
            "softmax,orthogonal",
            "--freeze-qk-after",
            "1",
            "--frozen-method",
            "gaussian",
            "--json",
            "--out",
            "cmp",
        ],
    );
    ok(&o);
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = s["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["attention"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["softmax-freeze@1", "orthogonal+gaussian"]);
}
