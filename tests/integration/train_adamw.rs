//! AdamW and gradient clipping against PyTorch: ten steps of `torch.optim.AdamW` (β = 0.9,
//! 0.95, ε = 1e-8, weight decay 0.1 on the 2-D weight only, cosine learning rate) with
//! `clip_grad_norm_(1.0)`, from `scripts/torch_adamw_fixture.py`.
//!
//! Tolerance: 2e-6 relative on parameters after each step. The update is computed operation
//! for operation as torch does; the gap comes from the clip norm, which we sum in f64.

use orthoformer::train::adamw::{AdamW, AdamWConfig, ParamGroup};
use orthoformer::train::clip::clip_grad_norm;
use safetensors::SafeTensors;

fn floats(st: &SafeTensors, name: &str) -> Vec<f32> {
    let t = st.tensor(name).unwrap();
    t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn ten_steps_match_torch() {
    let bytes = std::fs::read("tests/fixtures/train/adamw.safetensors").unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let lrs: Vec<f64> = st
        .tensor("lr")
        .unwrap()
        .data()
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut params = floats(&st, "w0");
    params.extend(floats(&st, "b0"));
    let groups = [
        ParamGroup {
            range: 0..12,
            decay: true,
        },
        ParamGroup {
            range: 12..17,
            decay: false,
        },
    ];
    let mut adam = AdamW::new(AdamWConfig::default(), 17);
    let mut worst = 0.0f64;
    for (step, &lr) in lrs.iter().enumerate() {
        let mut grads = floats(&st, &format!("gw{step}"));
        grads.extend(floats(&st, &format!("gb{step}")));
        let norm = clip_grad_norm(&mut grads, 1.0);
        let want_norm = floats(&st, &format!("norm{step}"))[0] as f64;
        assert!(
            (norm - want_norm).abs() <= 1e-6 * want_norm,
            "step {step}: norm {norm} vs {want_norm}"
        );
        adam.step(&mut params, &grads, &groups, lr);
        let mut want = floats(&st, &format!("w{}", step + 1));
        want.extend(floats(&st, &format!("b{}", step + 1)));
        for (i, (g, w)) in params.iter().zip(&want).enumerate() {
            let rel = ((g - w).abs() / w.abs().max(1e-3)) as f64;
            worst = worst.max(rel);
            assert!(rel < 2e-6, "step {step} param {i}: {g} vs torch {w}");
        }
    }
    eprintln!("worst relative difference to torch over 10 steps: {worst:.2e}");
}
