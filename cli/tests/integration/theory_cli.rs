//! `orthoformer theory` on a real (tiny) checkpoint trained by the binary: JSON shape, the
//! predicted ratio `sqrt(d_k/d_model)`, the plot files; and frozen projections measured as
//! orthonormal (norm ratio never above 1).

use crate::common::bin;

#[test]
fn theory_measures_a_trained_checkpoint() {
    let dir = std::env::temp_dir().join(format!("theory-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ck = dir.join("ck");
    let out = bin()
        .args([
            "train",
            "--preset",
            "tiny",
            "--attention",
            "orthogonal",
            "--steps",
            "3",
            "--json",
        ])
        .arg("--out")
        .arg(&ck)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bin()
        .args(["theory", "--json", "--checkpoint"])
        .arg(&ck)
        .arg("--out")
        .arg(dir.join("th"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["attention"], "orthogonal");
    let heads = v["heads"].as_array().unwrap();
    assert_eq!(heads.len(), 2 * 2, "tiny: 2 layers x 2 heads");
    let (c, d) = (v["d_model"].as_f64().unwrap(), v["d_k"].as_f64().unwrap());
    for h in heads {
        assert_eq!(h["projection"], "frozen W_Q");
        let pred = h["norm"]["predicted"].as_f64().unwrap();
        assert!((pred - (d / c).sqrt()).abs() < 1e-12);
        assert!(
            h["norm"]["max"].as_f64().unwrap() <= 1.0 + 1e-5,
            "orthonormal W never lengthens"
        );
        let r = h["random_tied"]["pearson"].as_f64().unwrap();
        assert!((-1.0..=1.0).contains(&r));
    }
    for f in ["theory.json", "theory_qk.png", "theory_qk.svg"] {
        assert!(dir.join("th").join(f).is_file(), "{f}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
