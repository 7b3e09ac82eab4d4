//! The training crate's AdamW on the real GPT against PyTorch: the model fixtures of
//! `scripts/torch_gpt_reference.py` (tiny preset, float64 torch) hold the parameters after 10
//! `torch.optim.AdamW` steps (lr 1e-2, β = 0.9, 0.95, ε = 1e-8, weight decay 0.1 on 2-D
//! tensors). Here those steps are taken by `train::AdamW` with the decay groups the training
//! loop derives from the model (`Trainable::param_parts`). Tolerance as the model's test:
//! `max|rust - torch| / max|torch|` ≤ 1e-4 per tensor (torch ran in f64, we run in f32).

use crate::common;

use common::gpt_fixture::{GptFixture, f32s, ids};
use orthoformer::train::adamw::groups_from;
use orthoformer::train::{AdamW, AdamWConfig, Trainable};

fn run(file: &str) {
    let fixture = GptFixture::load(file);
    let st = fixture.tensors();
    let mut model = fixture.model();
    let (x, y) = (ids(&st, "inputs"), ids(&st, "targets"));
    let n = model.params().len();
    let groups = groups_from(&model.param_parts(), n).unwrap();
    // Decay exactly on the 2-D tensors, as the torch reference's parameter groups.
    for t in &model.params().tensors {
        let g = groups.iter().find(|g| g.range == t.range()).unwrap();
        assert_eq!(g.decay, t.shape.len() == 2, "{}", t.name);
    }
    let cfg_adam = AdamWConfig {
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.1,
    };
    let mut adam = AdamW::new(cfg_adam, n);
    for step in 1..=10u64 {
        model.zero_grad();
        Trainable::forward_backward(&mut model, &x, &y, 2, 8, step).unwrap();
        let (p, g) = model.params_and_grads();
        adam.step(p, g, &groups, 1e-2);
    }
    for ti in model.params().tensors.clone() {
        // The K bias has an exactly zero gradient under softmax: Adam amplifies rounding noise.
        if ti.name.ends_with("attn.k.bias") && !fixture.cfg.attention.is_linear() {
            continue;
        }
        let want = f32s(&st, &format!("adamw.{}", ti.name));
        let got = &model.params().data[ti.range()];
        let scale = want.iter().fold(1e-6f32, |a, b| a.max(b.abs()));
        let worst = got
            .iter()
            .zip(&want)
            .fold(0.0f32, |a, (g, w)| a.max((g - w).abs()));
        assert!(
            worst / scale <= 1e-4,
            "{file} {}: rel err {:.2e}",
            ti.name,
            worst / scale
        );
    }
}

#[test]
fn adamw_on_gpt_matches_torch() {
    for f in [
        "softmax_pre",
        "orthogonal_post",
        "linear_pre",
        "orthogonal-linear_post",
    ] {
        run(f);
    }
}
