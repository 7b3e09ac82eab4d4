//! Smoke checks of the GPT model: initial loss near ln V, gradients match finite differences
//! (f64-free central differences in f32, loose tolerance), save/load round trip.

use orthoformer::model::{
    AttentionKind, Gpt, GptConfig, NormPlacement, Projection, load_model, save_model,
};

fn batch(cfg: &GptConfig, b: usize, t: usize) -> (Vec<u32>, Vec<u32>) {
    let v = cfg.vocab_size as u32;
    let x = (0..b * t).map(|i| (i as u32 * 7 + 3) % v).collect();
    let y = (0..b * t).map(|i| (i as u32 * 5 + 1) % v).collect();
    (x, y)
}

/// Doubles the weights so gradients are not tiny, except `W_Q, W_K` started at the frozen
/// draw (`orthogonal-trained`): already `1/sqrt(C)` in scale, doubled they saturate the softmax
/// and central differences in f32 stop resolving the gradient.
fn enlarge(m: &mut Gpt) {
    let from_draw = m.config().attention.q_projection() == Projection::TrainedFromDraw;
    let keep: Vec<_> = m
        .params()
        .tensors
        .iter()
        .filter(|t| {
            from_draw && (t.name.ends_with("attn.q.weight") || t.name.ends_with("attn.k.weight"))
        })
        .map(|t| t.range())
        .collect();
    for (i, v) in m.params_mut().data.iter_mut().enumerate() {
        if !keep.iter().any(|r| r.contains(&i)) {
            *v *= 2.0;
        }
    }
}

fn check_grads(kind: AttentionKind, norm: NormPlacement) {
    check_grads_of(GptConfig {
        attention: kind,
        norm,
        ..GptConfig::preset("tiny").unwrap()
    });
}

fn check_grads_of(cfg: GptConfig) {
    let (kind, norm) = (cfg.attention, cfg.norm);
    let mut m = Gpt::new(cfg.clone(), 1).unwrap();
    enlarge(&mut m);
    let (x, y) = batch(&cfg, 2, 6);
    m.zero_grad();
    let loss = m.forward_backward(&x, &y, 2, 6, 0).unwrap();
    assert!(loss.is_finite());
    let grad = m.params().grad.clone();
    let n = grad.len();
    let mut worst = 0.0f32;
    for i in (0..n).step_by(7) {
        let h = 3e-3f32;
        let orig = m.params().data[i];
        m.params_mut().data[i] = orig + h;
        let lp = m.loss(&x, &y, 2, 6).unwrap();
        m.params_mut().data[i] = orig - h;
        let lm = m.loss(&x, &y, 2, 6).unwrap();
        m.params_mut().data[i] = orig;
        let fd = (lp - lm) / (2.0 * h);
        let err = (fd - grad[i]).abs() / (1e-2 + grad[i].abs().max(fd.abs()));
        if err > worst {
            worst = err;
        }
        assert!(
            err < 3e-2,
            "{kind:?} {norm:?} param {i} ({}): fd {fd} vs {}",
            name_of(&m, i),
            grad[i]
        );
    }
    eprintln!("{kind:?} {norm:?}: worst rel err {worst}");
}

fn name_of(m: &Gpt, i: usize) -> String {
    m.params()
        .tensors
        .iter()
        .find(|t| t.range().contains(&i))
        .map(|t| t.name.clone())
        .unwrap_or_default()
}

#[test]
fn gradients_match_finite_differences() {
    for kind in AttentionKind::ALL {
        for norm in [NormPlacement::Pre, NormPlacement::Post] {
            check_grads(kind, norm);
        }
    }
}

/// nanoGPT's choices: LayerNorm without bias and the exact (erf) GELU.
#[test]
fn gradients_without_norm_bias_and_with_exact_gelu_match_finite_differences() {
    for kind in [AttentionKind::Softmax, AttentionKind::Orthogonal] {
        for norm in [NormPlacement::Pre, NormPlacement::Post] {
            check_grads_of(GptConfig {
                attention: kind,
                norm,
                norm_bias: false,
                gelu: orthoformer::nn::gelu::Gelu::Erf,
                ..GptConfig::preset("tiny").unwrap()
            });
        }
    }
}

#[test]
fn initial_loss_is_near_log_vocab() {
    let cfg = GptConfig::preset("tiny").unwrap();
    let mut m = Gpt::new(cfg.clone(), 3).unwrap();
    let (x, y) = batch(&cfg, 3, 8);
    let l = m.loss(&x, &y, 3, 8).unwrap();
    assert!((l - (11f32).ln()).abs() < 0.05, "{l}");
}

#[test]
fn save_load_round_trip() {
    let dir = std::env::temp_dir().join(format!("ortho-model-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = GptConfig {
        attention: AttentionKind::Orthogonal,
        ..GptConfig::preset("tiny").unwrap()
    };
    let mut m = Gpt::new(cfg.clone(), 4).unwrap();
    let (x, y) = batch(&cfg, 2, 8);
    let l0 = m.loss(&x, &y, 2, 8).unwrap();
    let p = dir.join("m.safetensors");
    save_model(&p, &m).unwrap();
    let mut back = load_model(&p).unwrap();
    assert_eq!(back.params().data, m.params().data);
    assert_eq!(back.frozen().hash(), m.frozen().hash());
    assert_eq!(back.loss(&x, &y, 2, 8).unwrap(), l0);
    // Self-contained: the frozen W_Q, W_K are stored in full beside the trainable tensors.
    let bytes = std::fs::read(&p).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    for t in &m.frozen().tensors {
        let view = st.tensor(&t.name).unwrap();
        assert_eq!(
            view.data(),
            bytemuck::cast_slice::<f32, u8>(&t.data),
            "{}",
            t.name
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// With dropout the loss is a fixed function of the parameters for a fixed `dropout_seed`
/// (masks are counter-based), so finite differences of `forward_backward`'s loss check the
/// backward through every dropout site, the attention probabilities included.
#[test]
fn gradients_with_dropout_match_finite_differences() {
    for kind in AttentionKind::ALL {
        for norm in [NormPlacement::Pre, NormPlacement::Post] {
            let cfg = GptConfig {
                attention: kind,
                norm,
                dropout: 0.3,
                ..GptConfig::preset("tiny").unwrap()
            };
            let mut m = Gpt::new(cfg.clone(), 1).unwrap();
            enlarge(&mut m);
            let (x, y) = batch(&cfg, 2, 6);
            m.zero_grad();
            m.forward_backward(&x, &y, 2, 6, 42).unwrap();
            let grad = m.params().grad.clone();
            for i in (0..grad.len()).step_by(5) {
                let h = 3e-3f32;
                let orig = m.params().data[i];
                m.params_mut().data[i] = orig + h;
                let lp = m.forward_backward(&x, &y, 2, 6, 42).unwrap();
                m.params_mut().data[i] = orig - h;
                let lm = m.forward_backward(&x, &y, 2, 6, 42).unwrap();
                m.params_mut().data[i] = orig;
                let fd = (lp - lm) / (2.0 * h);
                let err = (fd - grad[i]).abs() / (1e-2 + grad[i].abs().max(fd.abs()));
                assert!(
                    err < 3e-2,
                    "{kind:?} {norm:?} dropout param {i} ({}): fd {fd} vs {}",
                    name_of(&m, i),
                    grad[i]
                );
            }
        }
    }
}
