//! The GPT matched to PyTorch: fixtures from `scripts/torch_gpt_reference.py` (float64 torch,
//! stored as f32) for the `tiny` preset, every attention variant and both norm placements,
//! with rotary positions (`-rope`: every kernel pre-LN, orthogonal post-LN too), and with a
//! learned per-head score temperature (`-temp`, alone and with rope): its gradient is checked
//! against PyTorch's like every other parameter's.
//! Checks, each with relative error `max|rust - torch| / max|torch|` below 1e-4:
//! logits, loss, every parameter gradient, and the parameters after 10 AdamW steps. A gradient
//! that is exactly zero in theory (the K bias under softmax, which is invariant to it) is
//! measured against 1e-3 of the model's largest gradient instead of its own maximum,
//! and left out of the AdamW check (Adam normalises its rounding noise to full-size steps).
//! (a local AdamW written after `torch.optim.AdamW`; the training crate's AdamW must match the
//! same fixture).

use crate::common;

use common::gpt_fixture::{GptFixture, f32s, ids};
use orthoformer::model::{Gpt, GptConfig};

const TOL: f32 = 1e-4;

/// Relative error as stated in the module doc, with `max|torch|` floored at `floor`;
/// panics with name, first values, max diff.
fn check(what: &str, got: &[f32], want: &[f32], tol: f32, floor: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0.0f32, |a, b| a.max(b.abs())).max(floor);
    let (mut worst, mut at) = (0.0f32, 0);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let d = (g - w).abs();
        if d > worst {
            worst = d;
            at = i;
        }
    }
    assert!(
        worst / scale <= tol,
        "{what}: rel err {:.3e} > {tol:.0e} (max diff {worst:.3e} at {at}); rust {:?} torch {:?}",
        worst / scale,
        &got[..got.len().min(4)],
        &want[..want.len().min(4)]
    );
}

struct AdamW {
    lr: f32,
    b1: f32,
    b2: f32,
    eps: f32,
    wd: f32,
}

/// One `torch.optim.AdamW` step (decoupled decay on `decay` tensors, bias-corrected moments).
fn adamw_step(model: &mut Gpt, m: &mut [f32], v: &mut [f32], step: i32, h: &AdamW) {
    let p = model.params_mut();
    let bc1 = 1.0 - h.b1.powi(step);
    let bc2 = 1.0 - h.b2.powi(step);
    for t in p.tensors.clone() {
        let wd = if t.decay { h.wd } else { 0.0 };
        for i in t.range() {
            let g = p.grad[i];
            p.data[i] *= 1.0 - h.lr * wd;
            m[i] = h.b1 * m[i] + (1.0 - h.b1) * g;
            v[i] = h.b2 * v[i] + (1.0 - h.b2) * g * g;
            let denom = (v[i] / bc2).sqrt() + h.eps;
            p.data[i] -= h.lr / bc1 * m[i] / denom;
        }
    }
}

fn run(file: &str) {
    let fixture = GptFixture::load(file);
    let (cfg, meta) = (&fixture.cfg, &fixture.meta);
    assert_eq!(
        *cfg,
        GptConfig {
            attention: cfg.attention,
            norm: cfg.norm,
            position: cfg.position,
            temperature: cfg.temperature,
            ..GptConfig::preset("tiny").unwrap()
        }
    );
    let st = fixture.tensors();
    let mut model = fixture.model();
    // Counts equal PyTorch's.
    assert_eq!(
        model.params().len().to_string(),
        meta["trainable"],
        "{file}: trainable count"
    );
    assert_eq!(
        model.frozen().len().to_string(),
        meta["frozen"],
        "{file}: frozen count"
    );
    let (x, y) = (ids(&st, "inputs"), ids(&st, "targets"));
    let (b, t) = (2, 8);
    let logits = model.logits(&x, b, t).unwrap().to_vec();
    check(
        &format!("{file} logits"),
        &logits,
        &f32s(&st, "logits"),
        TOL,
        1e-6,
    );
    model.zero_grad();
    let loss = model.forward_backward(&x, &y, b, t, 0).unwrap();
    check(
        &format!("{file} loss"),
        &[loss],
        &f32s(&st, "loss"),
        TOL,
        1e-6,
    );
    let gmax = model
        .params()
        .tensors
        .iter()
        .flat_map(|ti| f32s(&st, &format!("grad.{}", ti.name)))
        .fold(0.0f32, |a, b| a.max(b.abs()));
    for ti in model.params().tensors.clone() {
        let want = f32s(&st, &format!("grad.{}", ti.name));
        check(
            &format!("{file} grad {}", ti.name),
            &model.params().grad[ti.range()],
            &want,
            TOL,
            1e-3 * gmax,
        );
    }
    let frozen_before: Vec<Vec<f32>> = model
        .frozen()
        .tensors
        .iter()
        .map(|t| t.data.clone())
        .collect();
    let h = AdamW {
        lr: 1e-2,
        b1: 0.9,
        b2: 0.95,
        eps: 1e-8,
        wd: 0.1,
    };
    let n = model.params().len();
    let (mut m, mut v) = (vec![0.0; n], vec![0.0; n]);
    for step in 1..=10 {
        model.zero_grad();
        model.forward_backward(&x, &y, b, t, step as u64).unwrap();
        adamw_step(&mut model, &mut m, &mut v, step, &h);
    }
    for ti in model.params().tensors.clone() {
        // The K bias has an exactly zero gradient (softmax is shift invariant per row), so
        // Adam turns rounding noise into ±lr steps in any implementation: not comparable.
        if ti.name.ends_with("attn.k.bias") && !cfg.attention.is_linear() {
            continue;
        }
        let want = f32s(&st, &format!("adamw.{}", ti.name));
        check(
            &format!("{file} adamw {}", ti.name),
            &model.params().data[ti.range()],
            &want,
            TOL,
            1e-6,
        );
    }
    // Frozen means frozen: bit-identical after training.
    for (t, before) in model.frozen().tensors.iter().zip(&frozen_before) {
        assert!(t.data == *before, "{file}: frozen {} changed", t.name);
    }
}

#[test]
fn softmax_pre() {
    run("softmax_pre");
}
#[test]
fn softmax_post() {
    run("softmax_post");
}
#[test]
fn orthogonal_pre() {
    run("orthogonal_pre");
}
#[test]
fn orthogonal_post() {
    run("orthogonal_post");
}
#[test]
fn linear_pre() {
    run("linear_pre");
}
#[test]
fn linear_post() {
    run("linear_post");
}
#[test]
fn orthogonal_linear_pre() {
    run("orthogonal-linear_pre");
}
#[test]
fn orthogonal_linear_post() {
    run("orthogonal-linear_post");
}
#[test]
fn softmax_rope_pre() {
    run("softmax-rope_pre");
}
#[test]
fn orthogonal_rope_pre() {
    run("orthogonal-rope_pre");
}
#[test]
fn orthogonal_rope_post() {
    run("orthogonal-rope_post");
}
#[test]
fn linear_rope_pre() {
    run("linear-rope_pre");
}
#[test]
fn orthogonal_linear_rope_pre() {
    run("orthogonal-linear-rope_pre");
}
#[test]
fn orthogonal_temperature_pre() {
    run("orthogonal-temp_pre");
}
#[test]
fn softmax_temperature_post() {
    run("softmax-temp_post");
}
#[test]
fn orthogonal_rope_temperature_pre() {
    run("orthogonal-rope-temp_pre");
}
