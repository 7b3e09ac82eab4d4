//! `orthoformer params` run as a binary: tables, JSON, seed claims, and bad input (exit 2).

fn run(args: &[&str]) -> (i32, String, String) {
    let out = crate::common::run_args(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn seed_003_orthogonal_table_and_claims() {
    let (code, out, _) = run(&[
        "params",
        "--preset",
        "seed-003",
        "--attention",
        "orthogonal",
        "--seed-claims",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("124,402,944"), "{out}");
    assert!(out.contains("14,155,776"), "{out}");
    let claim = out
        .lines()
        .find(|l| l.starts_with("LayerNorm parameters per layer"))
        .unwrap_or_else(|| panic!("no LayerNorm claim in {out}"));
    assert!(
        claim.contains(" 1,536 ") && claim.contains(" 3,072 "),
        "{claim}"
    );
    assert!(out.contains("11.38% of all parameters"), "{out}");
}

#[test]
fn json_has_the_numbers() {
    let (code, out, _) = run(&[
        "params",
        "--preset",
        "gpt2-small",
        "--json",
        "--batch",
        "2",
        "--seq",
        "64",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["account"]["total"], 124_439_808);
    assert_eq!(v["account"]["memory"]["batch"], 2);
    assert!(v["account"]["flops_per_token"]["forward"].as_u64().unwrap() > 0);
}

#[test]
fn bad_inputs_exit_2_with_a_clear_message() {
    let dir = std::env::temp_dir().join(format!("ortho-cli-params-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = "vocab_size = 65\ncontext = 64\nn_layer = 2\nn_head = 4\nd_model = 32\nd_ff = 128\n\
attention = \"orthogonal\"\nnorm = \"pre\"\nattn_bias = false\nffn_bias = true\ndropout = 0.0\n\
frozen_method = \"qr\"\nfrozen_seed = 1\n";
    let ok = dir.join("ok.toml");
    std::fs::write(&ok, good).unwrap();
    assert_eq!(run(&["params", "--config", ok.to_str().unwrap()]).0, 0);
    let cases: Vec<(String, &str)> = vec![
        (
            good.replace("d_model = 32", "d_model = 30"),
            "not divisible",
        ),
        (good.replace("n_layer = 2", "n_layer = 0"), "n_layer is 0"),
        (good.replace("context = 64", "context = 0"), "context is 0"),
        (good.replace("n_head = 4", "n_head = 0"), "n_head is 0"),
        (
            good.replace("\"orthogonal\"", "\"quantum\""),
            "unknown variant",
        ),
        (format!("{good}colour = 3\n"), "unknown field"),
        (good.replace("dropout = 0.0\n", ""), "missing field"),
    ];
    for (i, (text, msg)) in cases.iter().enumerate() {
        let p = dir.join(format!("bad{i}.toml"));
        std::fs::write(&p, text).unwrap();
        let (code, _, err) = run(&["params", "--config", p.to_str().unwrap()]);
        assert_eq!(code, 2, "case {i}: {err}");
        assert!(err.contains(msg), "case {i}: expected {msg:?} in {err}");
        assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
    }
    let (code, _, err) = run(&["params", "--preset", "huge"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown preset"), "{err}");
    let (code, _, err) = run(&["params", "--attention", "cosine"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown attention"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
