//! The `qr` orthogonal draw in a loop, for profilers (`perf record`, callgrind): best-of
//! milliseconds per matrix for each shape, and an FNV-1a hash of the bits of seeds 0..8 so
//! two builds can be checked to give the same matrices.
//!
//! `cargo bench --bench ortho_qr_rate -- [ROUNDS] [MxN ...]`
use orthoformer::init::orthogonal::{OrthoMethod, orthogonal_f64};
use std::time::Instant;

fn fnv(h: &mut u64, w: &[f64]) {
    for v in w {
        for b in v.to_bits().to_le_bytes() {
            *h = (*h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(200);
    let mut shapes: Vec<(usize, usize)> = args
        .iter()
        .skip(1)
        .filter_map(|s| {
            let (a, b) = s.split_once('x')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    if shapes.is_empty() {
        shapes = vec![(768, 64), (256, 256)];
    }
    for (m, n) in shapes {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for seed in 0..8 {
            fnv(
                &mut h,
                &orthogonal_f64(m, n, OrthoMethod::Qr, 1.0, seed).unwrap(),
            );
        }
        let mut best = f64::MAX;
        for r in 0..rounds {
            let t = Instant::now();
            let w = orthogonal_f64(m, n, OrthoMethod::Qr, 1.0, 100 + r as u64).unwrap();
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(w);
        }
        println!("{m}x{n}: best {best:.4} ms of {rounds}, bits fnv {h:016x}");
    }
}
