//! `orthoformer bench` run as the real binary, without PyTorch: the JSON report's
//! structure and arithmetic (best round per side, the peak as the best reading, share of peak
//! and FLOP rate from the step's own count), every round kept, and clear errors for bad flags.
//! No timing is asserted.

use crate::common::run_args as run;

/// A JSON array of numbers.
fn numbers(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn bench_reports_best_rounds_and_keeps_every_round() {
    let o = run(&[
        "bench",
        "--configs",
        "a",
        "--attention",
        "softmax,orthogonal-hadamard",
        "--steps",
        "1",
        "--rounds",
        "2",
        "--no-torch",
        "--threads",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["threads"], 1);
    let peaks = numbers(&v["gemm_peak_rounds"]);
    assert_eq!(peaks.len(), 2);
    let peak = v["gemm_peak_gflops"].as_f64().unwrap();
    assert_eq!(peak, peaks[0].max(peaks[1]));
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["attention"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["softmax", "orthogonal-hadamard"]);
    for r in rows {
        assert_eq!(
            (r["config"].as_str(), r["batch"].as_u64()),
            (Some("A"), Some(16))
        );
        let o = &r["orthoformer"];
        let ms = o["ms_per_step"].as_f64().unwrap();
        let rounds = numbers(&r["orthoformer_ms_rounds"]);
        assert_eq!(rounds.len(), 2);
        assert_eq!(ms, rounds[0].min(rounds[1]), "the best round is reported");
        let flops = o["flops_per_step"].as_f64().unwrap();
        let gflops = o["gflops"].as_f64().unwrap();
        assert!((gflops - flops / (ms / 1e3) / 1e9).abs() < 1e-6 * gflops);
        let share = r["gemm_peak_share"].as_f64().unwrap();
        assert!((share - gflops / peak).abs() < 1e-9);
        assert!(r["torch_ms_per_step"].is_null() && r["speedup_vs_torch"].is_null());
        assert!(r["torch_error"].is_null(), "--no-torch is not an error");
        assert_eq!(r["torch_ms_rounds"].as_array().map(Vec::len), Some(0));
    }
    // Hadamard skips the Q/K products: fewer counted FLOPs than softmax.
    let f = |i: usize| rows[i]["orthoformer"]["flops_per_step"].as_f64().unwrap();
    assert!(f(1) < f(0));
}

#[test]
fn bad_bench_flags_are_one_clear_error() {
    for (args, needle) in [
        (
            &["bench", "--configs", "tiny"][..],
            "unknown config \"tiny\": use a or b",
        ),
        (&["bench", "--attention", "nope"][..], "unknown attention"),
        (&["bench", "--steps", "0"][..], "--steps"),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// `bench --model` against a llama.cpp cache holding a fake `llama-bench`: one that dies by
/// SIGILL (the VM that advertises AMX) is reported as an error naming the signal and the
/// rebuild, never as a figure; one that answers is described by the flags of `BUILD-INFO`.
#[cfg(unix)]
#[test]
fn a_crashing_peer_is_an_error_and_a_working_one_names_its_build() {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    use crate::common::{BIN, Scratch};
    use orthoformer::bench::llamacpp_native::LLAMACPP_PY_VERSION;
    use orthoformer::export::tiny_llama::write_tiny_llama_gguf;

    let dir = Scratch::new("cli_bench", "fake-peer");
    write_tiny_llama_gguf(&dir.join("tiny.gguf"), 1).unwrap();
    let cache = dir.join("cache");
    let root = cache.join(format!("llamacpp-{LLAMACPP_PY_VERSION}"));
    std::fs::create_dir_all(root.join("bin")).unwrap();
    let bench = |script: &str| {
        let path = root.join("bin").join("llama-bench");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = Command::new(BIN)
            .args([
                "bench",
                "--model",
                "tiny.gguf",
                "--no-torch",
                "--eval-tokens",
                "0",
            ])
            .args([
                "--prompt-tokens",
                "8",
                "--gen-tokens",
                "4",
                "--rounds",
                "1",
                "--json",
            ])
            .env("ORTHOFORMER_CACHE", &cache)
            .current_dir(&*dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["rows"][0].clone()
    };
    let row = bench("#!/bin/sh\nkill -ILL $$\n");
    let e = row["llamacpp_error"].as_str().unwrap();
    assert!(
        e.contains("died with signal 4 (SIGILL)") && e.contains("scripts/build_llamacpp.sh"),
        "{e}"
    );
    assert!(
        row["llamacpp"].is_null() && row["decode_vs_llamacpp"].is_null(),
        "{row}"
    );

    std::fs::write(
        root.join("BUILD-INFO"),
        "cpu: x\nflags: -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AMX_TILE=OFF Release static\n\
         check: passed\nnote: native build (GGML_NATIVE=ON) failed its check: signal 4\n",
    )
    .unwrap();
    // Prompt test for `-p 8`, generation test for `-n 4 -d 8`, in llama-bench's JSON.
    let answer = r#"#!/bin/sh
case "$*" in
  *"-p 8 -n 0"*) echo '[{"build_commit":"abc","cpu_info":"fake","type_k":"f16","n_prompt":8,"n_gen":0,"n_depth":0,"samples_ts":[100.0]}]' ;;
  *) echo '[{"build_commit":"abc","cpu_info":"fake","type_k":"f16","n_prompt":0,"n_gen":4,"n_depth":8,"samples_ts":[50.0]}]' ;;
esac
"#;
    let row = bench(answer);
    assert!(row["llamacpp_error"].is_null(), "{row}");
    let l = &row["llamacpp"];
    assert_eq!(
        (
            l["prefill_tokens_per_s"].as_f64(),
            l["decode_tokens_per_s"].as_f64()
        ),
        (Some(100.0), Some(50.0))
    );
    let info = l["system_info"].as_str().unwrap();
    assert!(
        info.contains("-DGGML_NATIVE=OFF -DGGML_AVX2=ON") && info.contains("failed its check"),
        "{info}"
    );
}
