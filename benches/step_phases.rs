//! Where a training step's time goes: forward (loss only), forward + backward, AdamW.
//!
//! Run: `cargo bench --bench step_phases`.
use orthoformer::model::{AttentionKind, Gpt, GptConfig};
use std::time::Instant;
fn best<F: FnMut()>(mut f: F) -> f64 {
    let mut b = f64::MAX;
    for _ in 0..15 {
        let t = Instant::now();
        f();
        b = b.min(t.elapsed().as_secs_f64() * 1e3);
    }
    b
}
fn main() {
    for (name, bsz) in [("config-a", 16), ("config-b", 8)] {
        for att in [AttentionKind::Softmax, AttentionKind::Orthogonal] {
            let mut cfg = GptConfig::preset(name).unwrap();
            cfg.attention = att;
            let t = cfg.context;
            let mut m = Gpt::new(cfg.clone(), 0).unwrap();
            let x: Vec<u32> = (0..(bsz * t) as u32).map(|i| (i * 7 + 1) % 65).collect();
            let fwd = best(|| {
                m.loss(&x, &x, bsz, t).unwrap();
            });
            let fb = best(|| {
                m.zero_grad();
                m.forward_backward(&x, &x, bsz, t, 0).unwrap();
            });
            println!("{name} {att:?}: forward {fwd:.1} ms, forward+backward {fb:.1} ms");
        }
    }
}
