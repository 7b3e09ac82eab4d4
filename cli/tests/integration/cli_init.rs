//! `orthoformer init` and `init-bench` run as a user would: outputs, JSON, exit codes, and a
//! one-line error with no partial file for every bad input.

use std::process::Output;

use crate::common;
use common::{Scratch, run};

fn tmpdir(name: &str) -> Scratch {
    Scratch::new("cli-init", name)
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn json_report_has_every_field() {
    let d = tmpdir("json");
    for method in ["qr", "svd", "householder", "cayley"] {
        let v = json(&run(
            &d,
            &[
                "init", "--method", method, "--rows", "48", "--cols", "16", "--json", "--count",
                "3",
            ],
        ));
        assert_eq!(v["method"], method);
        assert_eq!(v["rows"], 48);
        assert_eq!(v["cols"], 16);
        assert_eq!(v["dtype"], "f32");
        assert_eq!(v["count"], 3);
        assert_eq!(v["seed"], 0);
        assert_eq!(v["gain"], 1.0);
        assert_eq!(v["haar"], method != "cayley");
        let e = v["ortho_error_max"].as_f64().unwrap();
        assert!(e > 0.0 && e < 1e-5, "{e}");
        assert!(v["ms_per_matrix"].as_f64().unwrap() >= 0.0);
    }
    let v = json(&run(
        &d,
        &[
            "init", "--rows", "10", "--cols", "20", "--dtype", "f64", "--gain", "2", "--json",
        ],
    ));
    assert!(v["ortho_error_max"].as_f64().unwrap() < 1e-13);
}

/// Parses a little-endian `.npy` written by us: (descr, shape, data offset).
fn npy_header(bytes: &[u8]) -> (String, String, usize) {
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let h = std::str::from_utf8(&bytes[10..10 + len])
        .unwrap()
        .to_string();
    let descr = h
        .split("'descr': '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap()
        .to_string();
    let shape = h
        .split("'shape': ")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap()
        .to_string()
        + ")";
    (descr, shape, 10 + len)
}

#[test]
fn writes_npy_and_safetensors_with_the_right_shape() {
    let d = tmpdir("files");
    let out = run(
        &d,
        &[
            "init", "--rows", "5", "--cols", "3", "--count", "4", "--out", "w.npy",
        ],
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("written to w.npy"));
    let b = std::fs::read(d.join("w.npy")).unwrap();
    let (descr, shape, off) = npy_header(&b);
    assert_eq!((descr.as_str(), shape.as_str()), ("<f4", "(4, 5, 3)"));
    assert_eq!(b.len() - off, 4 * 5 * 3 * 4);
    // Matrix 0 of the file is the single matrix with the same seed.
    let out = run(
        &d,
        &[
            "init", "--rows", "5", "--cols", "3", "--dtype", "f64", "--out", "one.npy",
        ],
    );
    assert!(out.status.success());
    let one = std::fs::read(d.join("one.npy")).unwrap();
    let (descr, shape, off1) = npy_header(&one);
    assert_eq!((descr.as_str(), shape.as_str()), ("<f8", "(5, 3)"));
    let first64 = f64::from_le_bytes(one[off1..off1 + 8].try_into().unwrap());
    let first32 = f32::from_le_bytes(b[off..off + 4].try_into().unwrap());
    assert_eq!(first64 as f32, first32);

    let out = run(
        &d,
        &[
            "init",
            "--rows",
            "6",
            "--cols",
            "2",
            "--count",
            "2",
            "--out",
            "w.safetensors",
        ],
    );
    assert!(out.status.success());
    let st = std::fs::read(d.join("w.safetensors")).unwrap();
    let t = safetensors::SafeTensors::deserialize(&st).unwrap();
    let w = t.tensor("weight").unwrap();
    assert_eq!(w.shape(), &[2, 6, 2]);
    assert_eq!(w.dtype(), safetensors::Dtype::F32);
}

#[test]
fn human_summary_names_the_method() {
    let d = tmpdir("human");
    let out = run(
        &d,
        &["init", "--method", "cayley", "--rows", "8", "--cols", "8"],
    );
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("cayley 8x8") && s.contains("not Haar"), "{s}");
}

#[test]
fn every_bad_input_exits_2_with_one_line_and_no_file() {
    let d = tmpdir("bad");
    let cases: &[(&[&str], &str)] = &[
        (&["--rows", "0"], "zero dimension"),
        (&["--cols", "0"], "zero dimension"),
        (&["--gain", "NaN"], "gain"),
        (&["--gain", "inf"], "gain"),
        (&["--gain", "-1"], "gain"),
        (&["--method", "lu"], "unknown method"),
        (&["--dtype", "f16"], "dtype"),
        (&["--count", "0"], "count"),
        (&["--out", "no/such/dir/w.npy"], "no/such/dir/w.npy"),
        (&["--out", "w.txt"], "extension"),
        (&["--out", "w"], "extension"),
    ];
    for (args, needle) in cases {
        let mut full = vec!["init"];
        full.extend_from_slice(args);
        // Small matrices unless the case is about the shape.
        for (flag, v) in [("--rows", "8"), ("--cols", "4")] {
            if !args.contains(&flag) {
                full.extend_from_slice(&[flag, v]);
            }
        }
        let out = run(&d, &full);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(
        std::fs::read_dir(&d).unwrap().count(),
        0,
        "a file was left behind"
    );
}

#[test]
fn init_bench_json_and_bad_shape() {
    let d = tmpdir("bench");
    let v = json(&run(
        &d,
        &["init-bench", "--shape", "20x6", "--shape", "3x9", "--json"],
    ));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    for r in rows {
        assert!(r["ortho_error_f64"].as_f64().unwrap() < 1e-13);
        assert!(r["ortho_error_f32"].as_f64().unwrap() < 1e-5);
        assert!(r["median_ms"].as_f64().unwrap() >= 0.0);
        assert_eq!(r["runs"], 25);
    }
    for bad in [
        ["--shape", "0x4"],
        ["--shape", "12"],
        ["--runs", "3"],
        ["--method", "lu"],
    ] {
        let out = run(&d, &["init-bench", bad[0], bad[1]]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim().lines().count(),
            1
        );
    }
}

#[test]
fn init_bench_without_torch_still_prints_its_table() {
    let d = tmpdir("notorch");
    let out = run(
        &d,
        &[
            "init-bench",
            "--shape",
            "8x4",
            "--torch",
            "--python",
            "/nonexistent/python",
        ],
    );
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("householder") && s.contains("PyTorch not timed"),
        "{s}"
    );
    assert!(s.contains("pip install torch"), "{s}");
}

#[test]
fn toolkit_methods_report_stats_and_reject_bad_inputs() {
    let d = tmpdir("toolkit");
    let v = json(&run(
        &d,
        &[
            "init",
            "--method",
            "kaiming-normal",
            "--shape",
            "256,128",
            "--nonlinearity",
            "relu",
            "--json",
        ],
    ));
    assert_eq!(v["shape"], serde_json::json!([256, 128]));
    let std = v["std"].as_f64().unwrap();
    assert!((std - (2.0f64 / 128.0).sqrt()).abs() < 0.005, "{std}");
    assert!(v["ortho_error_max"].is_null());
    for key in ["mean", "min", "max"] {
        assert!(v[key].is_number(), "{key}");
    }
    let v = json(&run(
        &d,
        &["init", "--method", "mimetic", "--shape", "32", "--json"],
    ));
    assert!(v["qk_rel_error"].as_f64().unwrap() < 1e-10);
    let out = run(&d, &["init", "--list"]);
    let s = String::from_utf8_lossy(&out.stdout);
    for name in [
        "xavier-uniform",
        "trunc-normal",
        "dirac",
        "zer-o",
        "mimetic",
        "cayley",
    ] {
        assert!(s.contains(name), "{name} missing from --list");
    }
    let cases: &[&[&str]] = &[
        &["--method", "xavier-uniform", "--shape", "5"],
        &["--method", "kaiming-normal", "--shape", "5"],
        &["--method", "sparse", "--shape", "5", "--sparsity", "0.1"],
        &["--method", "eye", "--shape", "2,2,2"],
        &["--method", "dirac", "--shape", "4,4"],
        &["--method", "dirac", "--shape", "6,2,3", "--groups", "4"],
        &["--method", "kaiming-uniform", "--nonlinearity", "gelu"],
        &["--method", "sparse", "--sparsity", "1.5"],
        &["--method", "kaiming-uniform", "--mode", "fan_avg"],
        &["--method", "trunc-normal", "--lo", "1", "--hi", "1"],
        &["--method", "normal", "--shape", "3,-2"],
        &["--method", "normal", "--shape", "3,0"],
        &["--method", "normal", "--shape", "3,x"],
    ];
    for args in cases {
        let mut full = vec!["init", "--out", "w.npy"];
        full.extend_from_slice(args);
        let out = run(&d, &full);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    assert!(!d.join("w.npy").exists());
}

#[test]
fn init_probe_writes_plots_and_json() {
    let d = tmpdir("probe");
    let v = json(&run(
        &d,
        &[
            "init-probe",
            "--depth",
            "6",
            "--width",
            "16",
            "--batch",
            "32",
            "--out-dir",
            "plots",
            "--json",
        ],
    ));
    let curves = v["curves"].as_array().unwrap();
    assert_eq!(curves.len(), 15);
    // Orthogonal init keeps a linear network's signal exactly: std stays put across depth.
    let orth = curves
        .iter()
        .find(|c| c["init"] == "orthogonal" && c["activation"] == "linear")
        .unwrap();
    let f: Vec<f64> = orth["forward_std"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(f.len(), 6);
    assert!((f[5] / f[0] - 1.0).abs() < 0.01, "{f:?}");
    let png = std::fs::read(d.join("plots/init_probe.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let svg = std::fs::read_to_string(d.join("plots/init_probe.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("tanh"));
    let out = run(&d, &["init-probe", "--depth", "0"]);
    assert_eq!(out.status.code(), Some(2));
}
