//! "A finite model in, a NaN model out, exit 0" no more: `quantize --out` refuses weights
//! whose block scales f16 cannot hold (a q4_0 scale is max|w|/8: a weight of 1e6 gave a
//! file of infinities, caught only as "a writer or engine bug"), naming the tensor and the
//! formats that can hold it; a model holding NaN is neither quantised (a block's maximum
//! skipped the NaN and the file looked fine) nor rotated into a file without `--check`.
//! Each refusal is one line, exit 2, with nothing written and nothing staged left.

use crate::common::{Scratch, run, stderr};

use std::path::Path;
use std::process::Output;

use orthoformer::export::llama::save_gguf;
use orthoformer::export::tiny_llama::{byte_tokenizer_metadata, tiny_llama_weights};
use orthoformer::io::gguf::GgmlType;

/// Exit 2, one line `error: ...` holding every one of `needles`.
#[track_caller]
fn refused(o: &Output, needles: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.starts_with("error: ") && e.trim_end().lines().count() == 1,
        "{e:?}"
    );
    for n in needles {
        assert!(e.contains(n), "expected {n:?} in {e}");
    }
}

/// The tiny model (width 64, FFN 128) with weight 5 of layer 0's `up_proj` set to `x`. The
/// writer refuses NaN, so a NaN is patched into the file's bytes over a finite marker.
fn tiny_with(path: &Path, x: f32) {
    const MARK: f32 = 1234.567;
    let mut w = tiny_llama_weights(0);
    w.layers[0].w_up[5] = if x.is_finite() { x } else { MARK };
    save_gguf(&w, &byte_tokenizer_metadata(), path, GgmlType::F32).unwrap();
    if !x.is_finite() {
        let mut bytes = std::fs::read(path).unwrap();
        let at = bytes
            .windows(4)
            .position(|b| b == MARK.to_le_bytes())
            .expect("the marker's bytes");
        bytes[at..at + 4].copy_from_slice(&x.to_le_bytes());
        std::fs::write(path, bytes).unwrap();
    }
}

fn quantize(dir: &Path, model: &str, ty: &str, method: &str) -> Output {
    let args = [
        "quantize",
        "--model",
        model,
        "--out",
        "q.gguf",
        "--gguf-type",
        ty,
        "--method",
        method,
        "--calib-tokens",
        "64",
        "--context",
        "16",
    ];
    run(dir, &args)
}

#[track_caller]
fn nothing_written(dir: &Path, name: &str) {
    assert!(!dir.join(name).exists(), "{name} was written");
    assert!(
        !dir.join(format!(".{name}.staged")).exists(),
        "{name} left staged"
    );
}

#[test]
fn quantize_refuses_weights_whose_f16_scales_overflow() {
    let dir = Scratch::new("finite_outputs", "scales");
    // 1e6 needs a q4_0 scale of 125000 (f16 stops at 65504); q8_0's is 7874.
    tiny_with(&dir.join("big.gguf"), 1e6);
    for method in ["rtn", "gptq"] {
        refused(
            &quantize(&dir, "big.gguf", "q4_0", method),
            &[
                "model.layers.0.mlp.up_proj.weight",
                "row 0",
                "q4_0",
                "65504",
                "q8_0 or q5_1 or q5_0 or iq4_nl can hold it",
            ],
        );
        nothing_written(&dir, "q.gguf");
    }
    // Beyond 8.3e6 no block format holds it.
    tiny_with(&dir.join("huge.gguf"), 1e8);
    refused(
        &quantize(&dir, "huge.gguf", "q8_0", "rtn"),
        &["no GGUF block format can hold it"],
    );
    nothing_written(&dir, "q.gguf");
    // The format that holds it writes the file, and it runs.
    let o = quantize(&dir, "big.gguf", "q8_0", "rtn");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.join("q.gguf").is_file());
}

#[test]
fn a_nan_model_is_neither_quantised_nor_rotated_into_a_file() {
    let dir = Scratch::new("finite_outputs", "nan");
    tiny_with(&dir.join("nan.gguf"), f32::NAN);
    for (ty, method) in [("q8_0", "rtn"), ("q4_0", "rtn-clip"), ("q4_k", "gptq")] {
        refused(
            &quantize(&dir, "nan.gguf", ty, method),
            &["model.layers.0.mlp.up_proj.weight holds NaN"],
        );
        nothing_written(&dir, "q.gguf");
    }
    for out in ["r.gguf", "r-hf"] {
        for ty in ["f32", "f16"] {
            let o = run(
                &dir,
                &[
                    "rotate",
                    "--model",
                    "nan.gguf",
                    "--out",
                    out,
                    "--gguf-type",
                    ty,
                ],
            );
            refused(&o, &["holds NaN"]);
            nothing_written(&dir, out);
        }
    }
    // The same model with a finite weight there is quantised and rotated.
    tiny_with(&dir.join("ok.gguf"), 0.5);
    let o = quantize(&dir, "ok.gguf", "q4_0", "rtn");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&dir, &["rotate", "--model", "ok.gguf", "--out", "r.gguf"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
