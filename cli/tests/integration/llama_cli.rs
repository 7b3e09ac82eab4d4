//! The real binary on SmolLM2-135M: generate, eval, rotate --check, quantize, align; numbers
//! come back as JSON and bad flags are exit-2 errors.

use crate::models as common;

use std::path::Path;
use std::process::Output;

fn run(args: &[&str]) -> Output {
    crate::common::run(&common::repo_root(), args)
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn generate_eval_rotate_quantize_align() {
    let model = common::smollm2();
    let m = model.to_str().unwrap();
    let o = run(&[
        "generate",
        "--model",
        m,
        "--prompt",
        "The capital of France is",
        "--max-new-tokens",
        "2",
        "--temperature",
        "0",
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("The capital of France is Paris"));
    let g = json(&run(&[
        "generate",
        "--model",
        m,
        "--prompt",
        "The capital of France is",
        "--max-new-tokens",
        "2",
        "--temperature",
        "0",
        "--json",
    ]));
    assert!(g["text"].as_str().unwrap().starts_with(" Paris"), "{g}");
    assert_eq!(
        (g["prompt_tokens"].as_u64(), g["new_tokens"].as_u64()),
        (Some(5), Some(2))
    );
    assert!(g["decode_tokens_per_s"].as_f64().unwrap() > 0.0);

    let e = json(&run(&[
        "eval",
        "--model",
        m,
        "--max-tokens",
        "64",
        "--context",
        "64",
        "--json",
    ]));
    let ppl = e["report"]["perplexity"].as_f64().unwrap();
    assert!(ppl > 5.0 && ppl < 200.0, "{ppl}");
    assert_eq!(e["report"]["tokens"], 64);

    let dir = std::env::temp_dir().join(format!("orthoformer-cli-{}", std::process::id()));
    let out = dir.join("rot");
    let r = json(&run(&[
        "rotate",
        "--model",
        m,
        "--rotation",
        "hadamard",
        "--seed",
        "5",
        "--out",
        out.to_str().unwrap(),
        "--check",
        "--check-tokens",
        "48",
        "--context",
        "48",
        "--json",
    ]));
    assert_eq!(r["check_passed"], true);
    let c = &r["check"];
    assert!(c["max_abs_logit_diff"].as_f64().unwrap() < 1e-2);
    assert!(c["mean_kl"].as_f64().unwrap() < 1e-6);
    assert!((c["ppl_a"].as_f64().unwrap() - c["ppl_b"].as_f64().unwrap()).abs() < 1e-2);
    assert!(Path::new(&out).join("model.safetensors").is_file());

    let a = json(&run(&[
        "align",
        "--model",
        m,
        "--model-b",
        out.to_str().unwrap(),
        "--layer",
        "4",
        "--max-tokens",
        "700",
        "--true-rotation",
        "hadamard",
        "--seed",
        "5",
        "--json",
    ]));
    assert!(a["distance_to_true_q"].as_f64().unwrap() < 1e-4, "{a}");
    assert!(a["relative_residual"].as_f64().unwrap() < 1e-4);
    // The same rotation from the weights alone, exactly; the aligned model is B's function.
    let w = json(&run(&[
        "align",
        "--weights",
        "--model",
        m,
        "--model-b",
        out.to_str().unwrap(),
        "--true-rotation",
        "hadamard",
        "--seed",
        "5",
        "--check-tokens",
        "48",
        "--context",
        "48",
        "--json",
    ]));
    assert!(
        w["distance_to_true_inverse"].as_f64().unwrap() < 1e-6,
        "{w}"
    );
    assert!(w["distance_after"].as_f64().unwrap() < 1e-6, "{w}");
    assert!(w["distance_before"].as_f64().unwrap() > 0.5, "{w}");
    assert_eq!(w["check_passed"], true);

    let q = json(&run(&[
        "quantize",
        "--model",
        m,
        "--wbits",
        "8",
        "--abits",
        "8",
        "--rotate",
        "hadamard",
        "--max-tokens",
        "48",
        "--context",
        "48",
        "--json",
    ]));
    let rows = q["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "FP, FP + rotation, W8A8");
    let fp = rows[0]["ppl"][0].as_f64().unwrap();
    let fp_rot = rows[1]["ppl"][0].as_f64().unwrap();
    assert!((fp - fp_rot).abs() < 1e-2 * fp);
    let stats = q["activation_stats"].as_array().unwrap();
    let k0 = stats[0]["stats"]["attn_in"]["mean_kurtosis"]
        .as_f64()
        .unwrap();
    let k1 = stats[1]["stats"]["attn_in"]["mean_kurtosis"]
        .as_f64()
        .unwrap();
    assert!(
        k1 < k0 / 5.0,
        "rotation should flatten q/k/v inputs: {k0} -> {k1}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_flags_are_exit_2() {
    let o = run(&["quantize", "--model", "x.gguf", "--wbits", "3"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["rotate", "--model", "missing.gguf", "--check"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("missing.gguf") && err.starts_with("error:"),
        "{err}"
    );
    let o = run(&["rotate", "--model", "missing.gguf"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to do"));
}
