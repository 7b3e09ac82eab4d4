//! Finite or refused. `init` refuses parameters that are not finite and
//! values that overflow; `eval`, `rotate --check` and `quantize` refuse a model whose logits
//! are NaN (one line, exit 2, nothing written), where they printed NaN or passed the check,
//! and so does `generate` (it sampled the lowest id);
//! `bench --threads` is bounded by the machine's cores.

use crate::common;
use crate::models;

use std::path::Path;
use std::process::Output;

use common::{Scratch, run, stderr};
use models::tiny_llama::write_tiny_bytes;

/// Exit 2, one line `error: ...` containing `needle`, no panic.
#[track_caller]
fn refused(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: ") && err.lines().count() == 1,
        "{err:?}"
    );
    assert!(err.contains(needle), "expected {needle:?} in {err}");
}

#[test]
fn init_refuses_infinite_parameters_and_values_that_overflow() {
    let dir = Scratch::new("nonfinite", "init");
    for (args, needle) in [
        (&["--gain", "inf"][..], "gain inf"),
        (
            &["--method", "constant", "--val", "inf"],
            "val inf is not a finite",
        ),
        (
            &["--method", "normal", "--std", "NaN"],
            "std NaN is not a finite",
        ),
        (
            &["--method", "uniform", "--lo=-inf"],
            "lo -inf is not a finite",
        ),
        (
            &["--method", "normal", "--std", "1e39"],
            "exceed f32's range",
        ),
        (
            &["--method", "uniform", "--lo", "-1e308", "--hi", "1e308"],
            "not finite",
        ),
        (
            &["--method", "normal", "--std", "1e300", "--dtype", "f64"],
            "overflows",
        ),
    ] {
        let mut all = vec!["init", "--rows", "64", "--cols", "64", "--out", "w.npy"];
        all.extend(args);
        refused(&run(&dir, &all), needle);
        assert!(!dir.join("w.npy").exists(), "{args:?}: nothing written");
    }
    // The same flags with sane values work.
    let o = run(
        &dir,
        &[
            "init", "--method", "normal", "--std", "1e30", "--out", "w.npy",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn thread_counts_beyond_the_cores_are_refused() {
    let dir = Scratch::new("nonfinite", "threads");
    for n in ["100000", "0"] {
        let o = run(
            &dir,
            &["bench", "--no-torch", "--steps", "1", "--threads", n],
        );
        refused(&o, &format!("--threads {n}"));
    }
    // The same through the environment, for every command: refused before any worker starts.
    for args in [
        &["params"][..],
        &["bench", "--no-torch", "--steps", "1"][..],
    ] {
        let o = common::bin()
            .args(args)
            .current_dir(&*dir)
            .env("RAYON_NUM_THREADS", "100000")
            .output()
            .unwrap();
        refused(&o, "RAYON_NUM_THREADS=100000");
    }
}

/// The tiny byte-level model with its final norm set to NaN: every logit is NaN.
fn nan_model(path: &Path) {
    write_tiny_bytes(path, 300);
    let mut bytes = std::fs::read(path).unwrap();
    // The final norm is the file's last tensor, filled as `sin(0.37 i + 10) / 2`.
    let norm: Vec<u8> = (0..8)
        .flat_map(|i| ((i as f32 * 0.37 + 10.0).sin() * 0.5).to_le_bytes())
        .collect();
    let at = bytes
        .windows(norm.len())
        .rposition(|w| w == norm.as_slice())
        .expect("the final norm's bytes");
    for k in 0..8 {
        bytes[at + 4 * k..at + 4 * k + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_model_whose_logits_are_nan_is_refused_not_measured() {
    let dir = Scratch::new("nonfinite", "nan");
    nan_model(&dir.join("nan.gguf"));
    let eval = [
        "eval",
        "--model",
        "nan.gguf",
        "--max-tokens",
        "64",
        "--context",
        "16",
    ];
    refused(&run(&dir, &eval), "NaN");
    let rotate = [
        "rotate",
        "--model",
        "nan.gguf",
        "--check",
        "--check-tokens",
        "32",
        "--context",
        "16",
        "--out",
        "r.gguf",
        "--out",
        "r-hf",
    ];
    refused(&run(&dir, &rotate), "NaN or infinite");
    assert!(
        !dir.join("r.gguf").exists() && !dir.join("r-hf").exists(),
        "nothing written"
    );
    let quantize = [
        "quantize",
        "--model",
        "nan.gguf",
        "--wbits",
        "8",
        "--abits",
        "8",
        "--max-tokens",
        "48",
        "--context",
        "16",
    ];
    refused(&run(&dir, &quantize), "NaN");
    let generate = [
        "generate",
        "--model",
        "nan.gguf",
        "--prompt",
        "ab",
        "--max-new-tokens",
        "2",
    ];
    refused(&run(&dir, &generate), "nothing to sample");
    // The model before the edit passes all four.
    write_tiny_bytes(&dir.join("ok.gguf"), 300);
    for args in [&eval[..], &rotate[..], &quantize[..], &generate[..]] {
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "nan.gguf" { "ok.gguf" } else { a })
            .collect();
        let o = run(&dir, &args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
}
