//! `rotate` and `quantize` check `--out` before any work (a bad path found after a minute of
//! GPTQ wastes the minute; `--out` equal to `--model` would replace the source), and a
//! rotation whose `--check` fails leaves the previous output as it was.

use crate::common::{Scratch, run, stderr};

use std::process::Output;

use orthoformer::export::tiny_llama::write_tiny_llama_gguf;

fn refused(o: &Output, want: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains(want) && e.trim_end().lines().count() == 1, "{e}");
}

fn tiny(dir: &Scratch) -> Vec<u8> {
    write_tiny_llama_gguf(&dir.join("tiny.gguf"), 1).unwrap();
    std::fs::read(dir.join("tiny.gguf")).unwrap()
}

#[test]
fn out_is_checked_before_any_work_and_never_replaces_the_model() {
    let dir = Scratch::new("rotate_outputs_cli", "out");
    let source = tiny(&dir);
    for out in ["tiny.gguf", "./tiny.gguf"] {
        refused(
            &run(&dir, &["rotate", "--model", "tiny.gguf", "--out", out]),
            "itself",
        );
    }
    refused(
        &run(
            &dir,
            &[
                "quantize",
                "--model",
                "tiny.gguf",
                "--out",
                "tiny.gguf",
                "--gguf-type",
                "q8_0",
            ],
        ),
        "itself",
    );
    assert_eq!(std::fs::read(dir.join("tiny.gguf")).unwrap(), source);
    // A folder that cannot be made (under a file) is found before the model is even opened
    // (this one does not exist either), not after calibrating and running GPTQ.
    std::fs::write(dir.join("afile"), b"x").unwrap();
    for cmd in [
        &[
            "quantize",
            "--model",
            "missing.gguf",
            "--out",
            "afile/sub/q.gguf",
            "--gguf-type",
            "q4_0",
            "--method",
            "gptq",
        ][..],
        &["rotate", "--model", "missing.gguf", "--out", "afile/r.gguf"],
    ] {
        refused(&run(&dir, cmd), "is not a folder");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("elsewhere.gguf", dir.join("link.gguf")).unwrap();
        refused(
            &run(
                &dir,
                &["rotate", "--model", "tiny.gguf", "--out", "link.gguf"],
            ),
            "link",
        );
        assert!(!dir.join("elsewhere.gguf").exists());
    }
    // Missing folders on the way to a good `--out` are made, as `train --out` makes them.
    let o = run(
        &dir,
        &["rotate", "--model", "tiny.gguf", "--out", "new/sub/r.gguf"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.join("new/sub/r.gguf").is_file());
    // A folder holding the model is never written over it.
    std::fs::create_dir(dir.join("m")).unwrap();
    let o = run(&dir, &["rotate", "--model", "tiny.gguf", "--out", "m/hf"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    refused(
        &run(&dir, &["rotate", "--model", "m/hf", "--out", "m"]),
        "holds the",
    );
    // A file where a folder is written, and the reverse.
    refused(
        &run(
            &dir,
            &[
                "rotate",
                "--model",
                "tiny.gguf",
                "--out",
                "m/hf/config.json",
            ],
        ),
        "is a file",
    );
    std::fs::create_dir(dir.join("d.gguf")).unwrap();
    refused(
        &run(&dir, &["rotate", "--model", "tiny.gguf", "--out", "d.gguf"]),
        "is a folder",
    );
    quantize_writes(&dir);
}

#[test]
fn a_failed_check_leaves_the_previous_output() {
    let dir = Scratch::new("rotate_outputs_cli", "failed");
    tiny(&dir);
    let rotate = |extra: &[&str]| {
        let mut args = vec![
            "rotate",
            "--model",
            "tiny.gguf",
            "--out",
            "r.gguf",
            "--check",
        ];
        args.extend_from_slice(&["--check-tokens", "32", "--context", "16"]);
        args.extend_from_slice(extra);
        run(&dir, &args)
    };
    let o = rotate(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = std::fs::read(dir.join("r.gguf")).unwrap();
    // f16 rounding against a tolerance of 0 fails the check.
    let o = rotate(&["--gguf-type", "f16", "--tolerance", "0", "--seed", "4"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("nothing written") && !out.contains("wrote"),
        "{out}"
    );
    assert_eq!(std::fs::read(dir.join("r.gguf")).unwrap(), before);
    assert!(!dir.join(".r.gguf.staged").exists());
}

/// A good `--out` of `quantize` is written, checked, and replaces an earlier file (run after
/// the refusals, which leave the folder as it was).
fn quantize_writes(dir: &Scratch) {
    for method in ["rtn", "gptq"] {
        let o = run(
            dir,
            &[
                "quantize",
                "--model",
                "tiny.gguf",
                "--out",
                "q.gguf",
                "--gguf-type",
                "q4_0",
                "--method",
                method,
                "--rotate",
                "hadamard",
                "--json",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(r["max_abs_logit_diff_file"].as_f64().unwrap() < 1e-3, "{r}");
        assert_eq!(
            r["bytes"].as_u64(),
            Some(std::fs::metadata(dir.join("q.gguf")).unwrap().len())
        );
        assert!(!dir.join(".q.gguf.staged").exists());
    }
}

#[test]
fn align_weights_flags_are_checked() {
    let dir = Scratch::new("rotate_outputs_cli", "align");
    tiny(&dir);
    let base = ["align", "--model", "tiny.gguf", "--model-b", "tiny.gguf"];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let go = |extra: &[&str]| {
        let args = with(extra);
        run(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    refused(&go(&["--layer", "1", "--out", "x"]), "--weights");
    refused(&go(&["--weights", "--layer", "1"]), "--layer");
    refused(&go(&["--weights", "--iterations", "0"]), "--iterations");
    refused(&go(&["--weights", "--out", "tiny.gguf"]), "itself");
    refused(&go(&["--weights", "--context", "4096"]), "--context");
    // The model aligned to itself: a check that passes, the output written.
    let o = go(&[
        "--weights",
        "--heads",
        "--permute-ffn",
        "--out",
        "same",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["check_passed"], true, "{r}");
    assert!(dir.join("same").join("model.safetensors").is_file());
}
