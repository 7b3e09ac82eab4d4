//! Rate of the causal attention kernels alone at the shapes of configs A and B (GFLOP/s of
//! the products they run), to see how far the small per-head products fall below the GEMM peak.
//!
//! Run: `cargo bench --bench attention_rate`.
use orthoformer::nn::attention::{self, Dims, Grads, HeadLayout, Heads, HeadsMut};
use std::time::Instant;

fn best<F: FnMut()>(mut f: F) -> f64 {
    let mut b = f64::MAX;
    for _ in 0..20 {
        let t = Instant::now();
        f();
        b = b.min(t.elapsed().as_secs_f64());
    }
    b
}

fn heads_mut(x: &mut [f32], layout: HeadLayout) -> HeadsMut<'_> {
    HeadsMut { x, layout }
}

fn main() {
    for (name, b, t, c, h) in [
        ("main job", 12, 64, 128, 4),
        ("A", 16, 128, 128, 4),
        ("B", 8, 256, 384, 6),
    ] {
        let d = c / h;
        let n = b * t * c;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
            .collect();
        let (mut o, mut att, mut dp) = (
            vec![0.0; n],
            vec![0.0; b * h * t * t],
            vec![0.0; b * h * t * t],
        );
        let (mut dq, mut dk, mut dv) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let lay = HeadLayout::rows(t, c, d);
        let dims = Dims { b, h, t, d };
        let hd = |x| Heads { x, layout: lay };
        let scale = 1.0 / (d as f32).sqrt();
        let fwd = best(|| {
            attention::forward(
                heads_mut(&mut o, lay),
                &mut att,
                hd(&x),
                hd(&x),
                hd(&x),
                dims,
                scale,
                None,
            )
        });
        let bwd = best(|| {
            let grads = Grads {
                dq: heads_mut(&mut dq, lay),
                dk: heads_mut(&mut dk, lay),
                dv: heads_mut(&mut dv, lay),
            };
            attention::backward(
                grads,
                &mut dp,
                hd(&x),
                &att,
                hd(&x),
                hd(&x),
                hd(&x),
                dims,
                scale,
                None,
            )
        });
        // Two products forward, four backward, each 2·pairs·D per head.
        let pairs = attention::causal_pairs(t).map_or(f64::NAN, |p| p as f64);
        let f1 = 2.0 * 2.0 * pairs * d as f64 * (b * h) as f64 / 1e9;
        println!(
            "{name}: forward {:.2} ms ({:.1} GFLOP/s), backward {:.2} ms ({:.1} GFLOP/s)",
            fwd * 1e3,
            f1 / fwd,
            bwd * 1e3,
            2.0 * f1 / bwd
        );
    }
}
