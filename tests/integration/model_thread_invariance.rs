//! A training step gives the same bits on a 1-thread and a 2-thread pool: every split of the
//! work (matmul halves, LayerNorm and bias row blocks, attention heads) depends only on shapes.

use orthoformer::model::{AttentionKind, Gpt, GptConfig};

fn grads(threads: usize, attention: AttentionKind) -> (f32, Vec<f32>) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    pool.install(|| {
        // Config A width; 1,152 tokens cross the split thresholds and halve off a gemm block.
        let mut cfg = GptConfig::preset("config-a").expect("preset");
        cfg.attention = attention;
        cfg.n_layer = 2;
        let (b, t) = (12, 96);
        let mut m = Gpt::new(cfg, 3).expect("model");
        let x: Vec<u32> = (0..(b * t) as u32).map(|i| (i * 7 + 1) % 65).collect();
        let y: Vec<u32> = (0..(b * t) as u32).map(|i| (i * 13 + 5) % 65).collect();
        m.zero_grad();
        let loss = m.forward_backward(&x, &y, b, t, 0).expect("step");
        (loss, m.params().grad.clone())
    })
}

#[test]
fn one_and_two_threads_give_identical_gradients() {
    for attention in [AttentionKind::Softmax, AttentionKind::Orthogonal] {
        let (l1, g1) = grads(1, attention);
        let (l2, g2) = grads(2, attention);
        assert_eq!(l1.to_bits(), l2.to_bits(), "{attention:?} loss");
        let differ = g1
            .iter()
            .zip(&g2)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(differ, 0, "{attention:?}: {differ} gradient entries differ");
    }
}
