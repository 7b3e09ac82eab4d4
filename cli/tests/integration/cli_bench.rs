//! `orthoformer bench` run as the real binary (issue 9), without PyTorch: the JSON report's
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
