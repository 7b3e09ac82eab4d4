//! QuaRot's rotation set end to end through the binary: `rotate --rotate-heads --check` is
//! exact on a tiny model; `quantize --out --full-rotation` writes a SmolLM2 file with R1, R2
//! and R4 folded in, the engine runs it (R4 read back from the file) with 8- and 4-bit
//! activations and KV cache under `eval` and `generate`, and what cannot take such a file
//! or such flags refuses in one line.

use crate::common::{Scratch, run, stderr};
use crate::models as common;

use std::process::Output;

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn refused(o: &Output, want: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains(want) && e.trim_end().lines().count() == 1, "{e}");
}

#[test]
fn rotate_heads_is_exact_on_a_tiny_model() {
    let dir = Scratch::new("quantize_cli", "heads");
    let model = dir.join("tiny.gguf");
    common::tiny_llama::write_tiny(&model, None);
    std::fs::write(
        dir.join("t.txt"),
        "abc ab cab ba cc ab abc a b c ".repeat(4),
    )
    .unwrap();
    let r = json(&run(
        &dir,
        &[
            "rotate",
            "--model",
            "tiny.gguf",
            "--rotate-heads",
            "--check",
            "--data",
            "t.txt",
            "--check-tokens",
            "24",
            "--context",
            "12",
            "--tolerance",
            "1e-4",
            "--json",
        ],
    ));
    assert_eq!(r["heads"], true);
    assert_eq!(r["check_passed"], true, "{r}");
    assert!(
        r["check"]["max_abs_logit_diff"].as_f64().unwrap() < 1e-4,
        "{r}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn a_fully_rotated_w4a4kv4_model_runs_in_eval_and_generate() {
    let model = common::smollm2();
    let m = model.to_str().unwrap();
    let dir = Scratch::new("quantize_cli", "full");
    let q = json(&run(
        &dir,
        &[
            "quantize",
            "--model",
            m,
            "--out",
            "r.gguf",
            "--gguf-type",
            "q8_0",
            "--full-rotation",
            "--seed",
            "3",
            "--json",
        ],
    ));
    assert_eq!(q["rotate"], "R1+R2+R4", "{q}");
    assert!(q["max_abs_logit_diff_file"].as_f64().unwrap() < 1e-3, "{q}");
    assert_eq!(q["greedy_same"], true);
    let eval = |extra: &[&str]| {
        let mut a = vec![
            "eval",
            "--model",
            "r.gguf",
            "--max-tokens",
            "96",
            "--context",
            "48",
            "--json",
        ];
        a.extend_from_slice(extra);
        json(&run(&dir, &a))["report"]["perplexity"]
            .as_f64()
            .unwrap()
    };
    let src = json(&run(
        &dir,
        &[
            "eval",
            "--model",
            m,
            "--max-tokens",
            "96",
            "--context",
            "48",
            "--json",
        ],
    ))["report"]["perplexity"]
        .as_f64()
        .unwrap();
    let w8 = eval(&[]);
    let w8a8kv8 = eval(&["--abits", "8", "--kv-cache", "q8", "--qk-hadamard"]);
    let w8a4kv4 = eval(&[
        "--abits",
        "4",
        "--act-clip",
        "0.9",
        "--kv-cache",
        "q4",
        "--qk-hadamard",
    ]);
    // Q8_0 weights after rotation, then 8-bit activations and cache: close to the source;
    // 4 bits cost more, and every figure is finite.
    assert!(
        (w8 / src - 1.0).abs() < 0.05,
        "source {src}, rotated Q8_0 {w8}"
    );
    assert!((w8a8kv8 / w8 - 1.0).abs() < 0.05, "{w8} -> A8KV8 {w8a8kv8}");
    assert!(
        w8a4kv4.is_finite() && w8a4kv4 > w8a8kv8,
        "{w8a8kv8} -> A4KV4 {w8a4kv4}"
    );
    let g = run(
        &dir,
        &[
            "generate",
            "--model",
            "r.gguf",
            "--prompt",
            "The capital of France is",
            "--max-new-tokens",
            "4",
            "--temperature",
            "0",
            "--abits",
            "8",
            "--kv-cache",
            "q8",
            "--qk-hadamard",
        ],
    );
    assert!(g.status.success(), "{}", stderr(&g));
    // The file's down_proj needs R4: owned-weight readers refuse it rather than drop it.
    refused(
        &run(&dir, &["rotate", "--model", "r.gguf", "--check"]),
        "online Hadamard",
    );
    // Run-time settings are not part of a file.
    refused(
        &run(
            &dir,
            &[
                "quantize",
                "--model",
                m,
                "--out",
                "x.gguf",
                "--gguf-type",
                "q8_0",
                "--abits",
                "4",
            ],
        ),
        "at run time",
    );
    refused(
        &run(
            &dir,
            &[
                "eval",
                "--model",
                "r.gguf",
                "--kv-cache",
                "q4-g5",
                "--max-tokens",
                "8",
            ],
        ),
        "--kv-cache",
    );
    assert!(!dir.join("x.gguf").exists());
}
