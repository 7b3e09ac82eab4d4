//! Weight-space alignment (`align --weights`) on the tiny random Llama (2 layers, width 64,
//! 4 query heads over 2 key/value heads, RMSNorm weights made non-constant): a model and its
//! own rotated copy (residual and value heads, from `rotate`) are aligned back to float
//! precision and the true rotation recovered; FFN units shuffled by a permutation come back
//! only when the permutation is fitted too; the aligned model computes B's function, checked
//! as written; models of different shapes are refused by name.

use std::path::{Path, PathBuf};

use orthoformer::export::llama::save_gguf;
use orthoformer::export::tiny_llama::{byte_tokenizer_metadata, tiny_llama_weights};
use orthoformer::io::gguf::{GgmlType, Value};
use orthoformer::model::llama::{LlamaWeights, load_model};
use orthoformer::rotate::options::{ResidualFit, RotateOptions, WeightAlignOptions};
use orthoformer::rotate::weight_align::{self, WeightAlignJob, WeightAlignReport};
use orthoformer::rotate::weight_fit::{permute_ffn, relative_distance};
use orthoformer::rotate::{RotateJob, Rotation, RotationKind, fold_norms, rotate_weights};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("orthoformer-align-w-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The tiny model from `seed` with per-channel norm weights (so folding matters).
fn model(seed: u64) -> LlamaWeights {
    let mut w = tiny_llama_weights(seed);
    let c = w.cfg.d_model;
    let gain = |k: f32| {
        (0..c)
            .map(|i| 1.0 + 0.3 * (k + i as f32).sin())
            .collect::<Vec<_>>()
    };
    for (l, layer) in w.layers.iter_mut().enumerate() {
        layer.attn_norm = gain(l as f32);
        layer.ffn_norm = gain(10.0 + l as f32);
    }
    w.final_norm = gain(20.0);
    w
}

fn save(w: &LlamaWeights, path: &Path) {
    save_gguf(w, &byte_tokenizer_metadata(), path, GgmlType::F32).unwrap();
}

fn align(a: &Path, b: &Path, out: Vec<PathBuf>, o: WeightAlignOptions) -> WeightAlignReport {
    let job = WeightAlignJob {
        model: a.into(),
        model_b: b.into(),
        out,
        data: None,
        options: o,
    };
    weight_align::run(&job, &mut |_, _, _| {}).unwrap()
}

#[test]
fn a_rotated_copy_is_aligned_back_and_its_rotation_recovered() {
    let dir = scratch("rotated");
    let (a, b, back) = (dir.join("a.gguf"), dir.join("b"), dir.join("back.gguf"));
    save(&model(1), &a);
    let rot = RotateJob {
        model: a.clone(),
        out: vec![b.clone()],
        options: RotateOptions {
            rotation: RotationKind::Random,
            seed: 5,
            heads: true,
            ..RotateOptions::default()
        },
        ..RotateJob::default()
    };
    orthoformer::rotate::run(&rot, &mut |_, _| {}).unwrap();

    // The residual rotation alone leaves the value heads' rotation in place.
    let r = align(
        &a,
        &b,
        vec![],
        WeightAlignOptions {
            true_rotation: Some(RotationKind::Random),
            seed: 5,
            ..WeightAlignOptions::default()
        },
    );
    assert!(r.distance_before > 0.5, "{}", r.distance_before);
    assert!(
        r.distance_after > 1e-2,
        "R2 is not undone by R: {}",
        r.distance_after
    );
    assert_eq!(r.steps.len(), 1);
    assert!(r.check_passed);

    let r = align(
        &a,
        &b,
        vec![back.clone()],
        WeightAlignOptions {
            heads: true,
            true_rotation: Some(RotationKind::Random),
            seed: 5,
            ..WeightAlignOptions::default()
        },
    );
    assert!(r.distance_after < 1e-6, "{:?}", r.steps);
    assert!(r.distance_to_true_inverse.unwrap() < 1e-6, "{r:?}");
    assert!(r.max_abs_diff_to_true_inverse.unwrap() < 1e-6);
    // The distance never grows from one fit to the next (beyond float rounding).
    for s in r.steps.windows(2) {
        assert!(
            s[1].distance <= s[0].distance * (1.0 + 1e-6) + 1e-9,
            "{:?}",
            r.steps
        );
    }
    assert!(
        r.check_passed && r.check.max_abs_logit_diff < 1e-4,
        "{:?}",
        r.check
    );
    // `rotate` already untied B's head (A's final norm is not constant): nothing to untie.
    assert!(!r.lm_head_untied_by_fold);
    assert_eq!(r.outputs, vec![back.display().to_string()]);
    // What was written is A folded, to float precision.
    let mut want = load_model(&a).unwrap().weights;
    fold_norms(&mut want);
    let got = load_model(&back).unwrap().weights;
    assert!(relative_distance(&want, &got) < 1e-6);
}

#[test]
fn shuffled_ffn_units_come_back_only_with_the_permutation() {
    let dir = scratch("ffn");
    let (a, b) = (dir.join("a.gguf"), dir.join("b.gguf"));
    let base = model(2);
    save(&base, &a);
    let mut w = base.clone();
    fold_norms(&mut w);
    let (c, f) = (w.cfg.d_model, w.cfg.d_ff);
    rotate_weights(&mut w, &Rotation::hadamard(c, 3).unwrap()).unwrap();
    for (l, layer) in w.layers.iter_mut().enumerate() {
        let perm: Vec<usize> = (0..f).map(|i| (i * 37 + 11 * (l + 1)) % f).collect();
        permute_ffn(layer, &perm, c);
    }
    save(&w, &b);

    let r = align(&a, &b, vec![], WeightAlignOptions::default());
    assert!(
        r.distance_after > 0.3,
        "a rotation cannot undo a permutation: {r:?}"
    );
    let r = align(
        &a,
        &b,
        vec![],
        WeightAlignOptions {
            permute_ffn: true,
            ..WeightAlignOptions::default()
        },
    );
    assert!(r.distance_after < 1e-6, "{:?}", r.steps);
    assert!(
        r.check_passed && r.check.max_abs_logit_diff < 1e-4,
        "{:?}",
        r.check
    );

    // Channels shuffled (a permutation is a rotation) are matched by weight matching too;
    // a Hadamard rotation is not.
    let shuffled = dir.join("shuffled.gguf");
    let mut w = base.clone();
    fold_norms(&mut w);
    let mut p = vec![0.0f64; c * c];
    for i in 0..c {
        p[i * c + (i * 5 + 3) % c] = 1.0;
    }
    rotate_weights(&mut w, &Rotation::Dense { n: c, q: p }).unwrap();
    for layer in &mut w.layers {
        let perm: Vec<usize> = (0..f).rev().collect();
        permute_ffn(layer, &perm, c);
    }
    save(&w, &shuffled);
    let matching = WeightAlignOptions {
        residual: ResidualFit::Permutation,
        permute_ffn: true,
        ..WeightAlignOptions::default()
    };
    let r = align(&a, &shuffled, vec![], matching.clone());
    assert!(r.distance_after < 1e-6, "{:?}", r.steps);
    let r = align(&a, &b, vec![], matching);
    assert!(r.distance_after > 0.3, "{r:?}");

    // A model aligned to itself: nothing moves; its tied head is untied by folding.
    let r = align(&a, &a, vec![], WeightAlignOptions::default());
    assert!(r.distance_before == 0.0 && r.distance_after < 1e-7, "{r:?}");
    assert!(r.lm_head_untied_by_fold);

    // Two unrelated models: alignment lowers the distance but cannot remove it, and every
    // fitted form keeps the function.
    let other = dir.join("other.gguf");
    save(&model(9), &other);
    let r = align(
        &a,
        &other,
        vec![],
        WeightAlignOptions {
            heads: true,
            permute_ffn: true,
            ..WeightAlignOptions::default()
        },
    );
    assert!(
        r.distance_after < r.distance_before && r.distance_after > 0.5,
        "{r:?}"
    );
    assert!(r.check_passed, "{:?}", r.check);
}

#[test]
fn refuses_models_of_different_shapes_and_bad_options() {
    let dir = scratch("refuse");
    let (a, b) = (dir.join("a.gguf"), dir.join("b.gguf"));
    save(&model(1), &a);
    let mut short = model(1);
    short.layers.truncate(1);
    short.cfg.n_layer = 1;
    save(&short, &b);
    let job = |o: WeightAlignOptions| WeightAlignJob {
        model: a.clone(),
        model_b: b.clone(),
        out: vec![],
        data: None,
        options: o,
    };
    let e = weight_align::run(&job(WeightAlignOptions::default()), &mut |_, _, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`model_b` has layers 1 where `model` has 2"),
        "{e}"
    );
    let e = weight_align::run(
        &job(WeightAlignOptions {
            iterations: 0,
            ..WeightAlignOptions::default()
        }),
        &mut |_, _, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`iterations`"), "{e}");
    // The output may not be an input.
    let mut j = job(WeightAlignOptions::default());
    j.out = vec![b.clone()];
    let e = weight_align::run(&j, &mut |_, _, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("model_b"), "{e}");
    // The same shapes with another tokenizer (two tokens swapped): refused, by token, by
    // both two-model commands.
    let mut meta = byte_tokenizer_metadata();
    if let Some((_, Value::Array(_, tokens))) =
        meta.iter_mut().find(|(k, _)| k == "tokenizer.ggml.tokens")
    {
        tokens.swap(65, 66);
    }
    save_gguf(&model(2), &meta, &b, GgmlType::F32).unwrap();
    let e = weight_align::run(&job(WeightAlignOptions::default()), &mut |_, _, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tokenizer differs")
            && e.contains("its token 65 is \"B\" where the other's is \"A\""),
        "{e}"
    );
    let e = orthoformer::rotate::align::run(&orthoformer::rotate::align::AlignJob {
        model: a.clone(),
        model_b: b.clone(),
        data: None,
        options: Default::default(),
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("`model_b`'s tokenizer differs"), "{e}");
}

/// A model whose context is shorter than the check's default window is checked in a window of
/// its own context (the default is cut to fit, as `quantize` does); a window asked for that
/// exceeds the model's context is still refused, by name.
#[test]
fn the_default_check_window_fits_a_short_context_model() {
    let dir = scratch("short-context");
    let (a, b) = (dir.join("a.gguf"), dir.join("b.gguf"));
    let mut w = model(1);
    w.cfg.max_context = 64;
    save(&w, &a);
    save(&w, &b);
    let report = align(&a, &b, vec![], WeightAlignOptions::default());
    assert!(report.check_passed, "{:?}", report.check);
    let job = WeightAlignJob {
        model: a.clone(),
        model_b: b.clone(),
        out: vec![],
        data: None,
        options: WeightAlignOptions {
            context: Some(128),
            ..WeightAlignOptions::default()
        },
    };
    let e = weight_align::run(&job, &mut |_, _, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("`context` 128 exceeds the model's 64"), "{e}");
    // `rotate --check` takes the same default.
    let rot = RotateJob {
        model: a.clone(),
        out: vec![],
        options: RotateOptions::default(),
        check: true,
        data: None,
    };
    let r = orthoformer::rotate::run(&rot, &mut |_, _| {}).unwrap();
    assert_eq!(r.check_passed, Some(true), "{:?}", r.check);
}
