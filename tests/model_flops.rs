//! Frozen means frozen, measured: the matrix-product FLOPs actually run by a forward+backward
//! (counted in `nn::matmul`) equal the accounting exactly, and the orthogonal model runs
//! exactly `2·2·C²` fewer per layer per token (the skipped weight gradients of `W_Q, W_K`).
//! One test in this binary, so no other test's products are counted.

use orthoformer::model::accounting::flops_per_token;
use orthoformer::model::{AttentionKind, Gpt, GptConfig, NormPlacement};
use orthoformer::nn::matmul::flops_counted;

#[test]
fn counted_flops_equal_accounting() {
    let mut per_kind = Vec::new();
    // Linear attention runs its state updates outside `matmul`, so only softmax kinds count.
    for kind in AttentionKind::ALL.into_iter().filter(|k| !k.is_linear()) {
        for norm in [NormPlacement::Pre, NormPlacement::Post] {
            let cfg = GptConfig {
                attention: kind,
                norm,
                context: 16,
                ..GptConfig::preset("config-a").unwrap()
            };
            let mut m = Gpt::new(cfg.clone(), 0).unwrap();
            let (b, t) = (2, 16);
            let x: Vec<u32> = (0..(b * t) as u32).map(|i| i % 65).collect();
            let before = flops_counted();
            m.forward_backward(&x, &x, b, t, 0).unwrap();
            let ran = flops_counted() - before;
            let f = flops_per_token(&cfg, t).unwrap();
            assert_eq!(
                ran,
                (f.forward + f.backward) * (b * t) as u64,
                "{kind:?} {norm:?}"
            );
            per_kind.push((kind, ran));
        }
    }
    let c = 128u64;
    let ran = |k: AttentionKind| per_kind.iter().find(|p| p.0 == k).map(|p| p.1).unwrap();
    let saved = ran(AttentionKind::Softmax) - ran(AttentionKind::Orthogonal);
    assert_eq!(
        saved,
        4 * 2 * 2 * c * c * 32,
        "4 layers x 2 weights x 2C² x 32 tokens"
    );
}

/// `causal_pairs` in closed form equals the sum over the kernel's 64-row blocks, and huge
/// lengths overflow to `None` instead of looping.
#[test]
fn causal_pairs_closed_form() {
    use orthoformer::nn::attention::causal_pairs;
    for t in (0..400usize).chain([1000, 4095, 4096, 4097]) {
        let blocks = t.div_ceil(64);
        let by_block: usize = (0..blocks)
            .map(|i| {
                let (r0, r1) = (i * 64, ((i + 1) * 64).min(t));
                (r1 - r0) * r1
            })
            .sum();
        assert_eq!(causal_pairs(t), Some(by_block), "t = {t}");
    }
    assert_eq!(causal_pairs(usize::MAX), None);
    assert!(causal_pairs(1 << 31).is_some());
}
