//! GEMM rate of the `gemm` crate on the training shapes of configs A and B (GFLOP/s).
//!
//! Run: `cargo bench --bench gemm_shapes [-- THREADS [splitm|splitk]]`.
use orthoformer::nn::matmul::{Trans, matmul};
use std::time::Instant;
fn main() {
    let threads: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let shapes = [
        ("1024^3", 1024, 1024, 1024, Trans::No, Trans::No),
        ("qkv fwd", 2048, 384, 384, Trans::No, Trans::Yes),
        ("fc fwd", 2048, 384, 1536, Trans::No, Trans::Yes),
        ("proj fwd", 2048, 1536, 384, Trans::No, Trans::Yes),
        ("fc dX", 2048, 1536, 384, Trans::No, Trans::No),
        ("fc dW", 1536, 2048, 384, Trans::Yes, Trans::No),
        ("proj dW", 384, 2048, 1536, Trans::Yes, Trans::No),
        ("A fc fwd", 2048, 128, 512, Trans::No, Trans::Yes),
        ("A fc dW", 512, 2048, 128, Trans::Yes, Trans::No),
        ("A q fwd", 2048, 128, 128, Trans::No, Trans::Yes),
        ("A qkv fwd", 2048, 128, 384, Trans::No, Trans::Yes),
        ("A q dX", 2048, 128, 128, Trans::No, Trans::No),
        ("A qkv dX", 2048, 384, 128, Trans::No, Trans::No),
        ("A q dW", 128, 2048, 128, Trans::Yes, Trans::No),
        ("A qkv dW", 384, 2048, 128, Trans::Yes, Trans::No),
    ];
    let split = std::env::args().filter(|a| a != "--bench").nth(2).is_some();
    if std::env::args()
        .filter(|a| a != "--bench")
        .nth(2)
        .as_deref()
        == Some("splitm")
    {
        for (m, k, n, tb) in [
            (2048, 128, 128, Trans::Yes),
            (2048, 128, 512, Trans::Yes),
            (2048, 512, 128, Trans::Yes),
            (2048, 128, 128, Trans::No),
            (2048, 384, 384, Trans::Yes),
            (2048, 384, 1536, Trans::Yes),
            (2048, 1536, 384, Trans::No),
            (2048, 128, 65, Trans::Yes),
            (2048, 65, 128, Trans::No),
        ] {
            let a = vec![0.5f32; m * k];
            let b = vec![0.25f32; k * n];
            let mut c = vec![0.0f32; m * n];
            let reps = (2e10 / (2.0 * (m * n * k) as f64)).max(5.0) as usize;
            let (mut b1, mut b2) = (f64::MAX, f64::MAX);
            for _ in 0..7 {
                let t = Instant::now();
                for _ in 0..reps {
                    matmul(&mut c, &a, Trans::No, &b, tb, m, k, n, false, 2);
                }
                b1 = b1.min(t.elapsed().as_secs_f64() / reps as f64);
                let t = Instant::now();
                for _ in 0..reps {
                    split_rows(&mut c, &a, Trans::No, &b, tb, m, k, n);
                }
                b2 = b2.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            let f = 2.0 * (m * n * k) as f64 / 1e9;
            println!(
                "{m}x{k}x{n} {tb:?}: gemm-2t {:.1}  split-m {:.1} GFLOP/s",
                f / b1,
                f / b2
            );
        }
        return;
    }
    if std::env::args()
        .filter(|a| a != "--bench")
        .nth(2)
        .as_deref()
        == Some("splitk")
    {
        for (m, k, n) in [
            (128, 2048, 128),
            (384, 2048, 128),
            (512, 2048, 128),
            (128, 2048, 512),
            (384, 2048, 384),
            (1536, 2048, 384),
        ] {
            let a = vec![0.5f32; m * k];
            let b = vec![0.25f32; k * n];
            let mut c = vec![0.0f32; m * n];
            let mut tmp = vec![0.0f32; m * n];
            let reps = (2e10 / (2.0 * (m * n * k) as f64)).max(5.0) as usize;
            let (mut b1, mut b2) = (f64::MAX, f64::MAX);
            for _ in 0..7 {
                let t = Instant::now();
                for _ in 0..reps {
                    matmul(&mut c, &a, Trans::Yes, &b, Trans::No, m, k, n, true, 2);
                }
                b1 = b1.min(t.elapsed().as_secs_f64() / reps as f64);
                let t = Instant::now();
                for _ in 0..reps {
                    split_k(&mut c, &mut tmp, &a, &b, m, k, n);
                }
                b2 = b2.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            let f = 2.0 * (m * n * k) as f64 / 1e9;
            println!(
                "dW {m}x{k}x{n}: gemm-2t {:.1}  split-k {:.1} GFLOP/s",
                f / b1,
                f / b2
            );
        }
        return;
    }
    for (name, m, k, n, ta, tb) in shapes {
        let a = vec![0.5f32; m * k];
        let b = vec![0.25f32; k * n];
        let mut c = vec![0.0f32; m * n];
        for _ in 0..3 {
            matmul(&mut c, &a, ta, &b, tb, m, k, n, false, threads);
        }
        let reps = (2e10 / (2.0 * (m * n * k) as f64)).max(5.0) as usize;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..reps {
                if split {
                    split_rows(&mut c, &a, ta, &b, tb, m, k, n);
                } else {
                    matmul(&mut c, &a, ta, &b, tb, m, k, n, false, threads);
                }
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        let gf = 2.0 * (m * n * k) as f64 / best / 1e9;
        println!("{name:10} {m}x{k}x{n} {gf:.1} GFLOP/s");
    }
}

#[allow(clippy::too_many_arguments)]
fn split_rows(
    c: &mut [f32],
    a: &[f32],
    ta: Trans,
    b: &[f32],
    tb: Trans,
    m: usize,
    k: usize,
    n: usize,
) {
    // Column split when A is transposed (rows of A^T are strided); rows otherwise.
    if ta == Trans::No {
        let h = m / 2;
        let (c0, c1) = c.split_at_mut(h * n);
        let (a0, a1) = a.split_at(h * k);
        rayon::join(
            || matmul(c0, a0, ta, b, tb, h, k, n, false, 1),
            || matmul(c1, a1, ta, b, tb, m - h, k, n, false, 1),
        );
    } else {
        matmul(c, a, ta, b, tb, m, k, n, false, 2);
    }
}

/// `dW (m x n) += Aᵀ·B` with `k` split in two halves, one per thread.
pub fn split_k(c: &mut [f32], tmp: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    let h = k / 2;
    let (a0, a1) = a.split_at(h * m);
    let (b0, b1) = b.split_at(h * n);
    rayon::join(
        || matmul(c, a0, Trans::Yes, b0, Trans::No, m, h, n, true, 1),
        || matmul(tmp, a1, Trans::Yes, b1, Trans::No, m, k - h, n, false, 1),
    );
    for (x, y) in c.iter_mut().zip(tmp.iter()) {
        *x += y;
    }
}
