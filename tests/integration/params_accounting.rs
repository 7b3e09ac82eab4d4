//! Accounting equals the instantiated model (store sizes, frozen sizes, activation buffers)
//! and the reference figures of PyTorch.

use orthoformer::model::accounting::{account, activation_floats};
use orthoformer::model::{AttentionKind, Gpt, GptConfig, NormPlacement};

#[test]
fn seed_003_and_gpt2_small_reference_counts() {
    let orth = GptConfig {
        attention: AttentionKind::Orthogonal,
        ..GptConfig::preset("seed-003").unwrap()
    };
    let a = account(&orth, 1, 16).unwrap();
    assert_eq!(a.total, 124_402_944);
    assert_eq!(a.frozen, 14_155_776);
    assert_eq!(a.trainable, 124_402_944 - 14_155_776);
    let soft = account(&GptConfig::preset("seed-003").unwrap(), 1, 16).unwrap();
    assert_eq!((soft.total, soft.frozen), (124_402_944, 0));
    assert_eq!(
        account(&GptConfig::preset("gpt2-small").unwrap(), 1, 16)
            .unwrap()
            .total,
        124_439_808
    );
    // Per-layer LayerNorms: two of 2C each.
    let ln: usize = a
        .components
        .iter()
        .filter(|c| c.name.starts_with("layer norm"))
        .map(|c| c.trainable)
        .sum();
    assert_eq!(ln, 3_072);
}

#[test]
fn counts_and_activations_equal_the_instantiated_model() {
    for preset in ["tiny", "config-a"] {
        for kind in AttentionKind::ALL {
            for dropout in [0.0, 0.1] {
                let cfg = GptConfig {
                    attention: kind,
                    dropout,
                    norm: NormPlacement::Post,
                    ..GptConfig::preset(preset).unwrap()
                };
                let mut m = Gpt::new(cfg.clone(), 0).unwrap();
                let (b, t) = (2, cfg.context.min(16));
                let a = account(&cfg, b, t).unwrap();
                assert_eq!(m.params().len(), a.trainable, "{preset} {kind:?}");
                assert_eq!(m.frozen().len(), a.frozen, "{preset} {kind:?}");
                let x = vec![1u32; b * t];
                m.forward_backward(&x, &x, b, t, 0).unwrap();
                assert_eq!(
                    Some(m.activation_floats()),
                    activation_floats(&cfg, b, t),
                    "{preset} {kind:?} {dropout}"
                );
                assert_eq!(
                    Some(a.memory.activations),
                    activation_floats(&cfg, b, t).map(|n| 4 * n)
                );
            }
        }
    }
}

#[test]
fn frozen_flops_saving_is_the_q_k_weight_gradients() {
    let soft = GptConfig::preset("config-a").unwrap();
    let orth = GptConfig {
        attention: AttentionKind::Orthogonal,
        ..soft.clone()
    };
    let (fs, fo) = (
        account(&soft, 1, 128).unwrap().flops_per_token,
        account(&orth, 1, 128).unwrap().flops_per_token,
    );
    assert_eq!(fs.forward, fo.forward);
    let c = soft.d_model as u64;
    assert_eq!(
        fs.backward - fo.backward,
        soft.n_layer as u64 * 2 * 2 * c * c
    );
}

/// Huge configurations are counted in closed form at once, and figures that do not
/// fit 64 bits are errors, never wrapped totals.
#[test]
fn huge_configurations_are_counted_or_refused() {
    let mut cfg = GptConfig::preset("config-a").unwrap();
    cfg.n_layer = 1 << 24;
    let a = account(&cfg, 1, 16).unwrap();
    let one = account(&GptConfig::preset("config-a").unwrap(), 1, 16).unwrap();
    let block = |a: &orthoformer::model::accounting::Account| {
        a.components
            .iter()
            .filter(|c| c.per_layer)
            .map(|c| c.trainable)
            .sum::<usize>()
    };
    assert_eq!(block(&a), block(&one));
    assert_eq!(
        a.trainable - block(&a) * (1 << 24),
        one.trainable - block(&one) * 4
    );
    let e = account(&GptConfig::preset("config-a").unwrap(), usize::MAX, 128).unwrap_err();
    assert!(e.to_string().contains("overflows"), "{e}");
    // A long context is accounted without a loop over its row blocks.
    let mut long = GptConfig::preset("config-a").unwrap();
    (long.context, long.d_model, long.n_head, long.d_ff) = (1 << 28, 4, 1, 4);
    long.validate().unwrap();
    let a = account(&long, 1, 1 << 28).unwrap();
    assert!(a.flops_per_token.forward > 0);
}
