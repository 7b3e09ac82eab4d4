//! Single-thread CPU time of gemm on Llama evaluation shapes, whole vs panels.
//!
//! Run: `cargo bench --bench llama_shapes`.
use orthoformer::nn::matmul::{Operand, Trans, matmul_raw};
fn cpu_ns() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse::<f64>()
        .unwrap()
}
fn main() {
    for (m, k, n) in [
        (256usize, 576usize, 576usize),
        (256, 576, 1536),
        (256, 1536, 576),
        (256, 576, 192),
        (128, 576, 49152),
    ] {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i % 97) as f32 - 48.0) * 0.01)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i % 89) as f32 - 44.0) * 0.01)
            .collect();
        let mut c = vec![0.0f32; m * n];
        let f = 2.0 * (m * n * k) as f64;
        let reps = (4e9 / f).max(2.0) as usize;
        let mut line = format!("{m}x{k}x{n}:");
        for p in [64usize, 128, 256, 512, usize::MAX] {
            let p = p.min(n);
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = cpu_ns();
                for _ in 0..reps {
                    for c0 in (0..n).step_by(p) {
                        let w = p.min(n - c0);
                        let bop = Operand {
                            x: &b[c0 * k..],
                            ld: k,
                            t: Trans::Yes,
                        };
                        let aop = Operand {
                            x: &a,
                            ld: k,
                            t: Trans::No,
                        };
                        unsafe {
                            matmul_raw(
                                c.as_mut_ptr().add(c0),
                                n,
                                aop,
                                bop,
                                (m, k, w),
                                false,
                                1.0,
                                1,
                            )
                        };
                    }
                }
                best = best.min((cpu_ns() - t) / reps as f64);
            }
            line += &format!(
                " p{}={:.0}",
                if p == n {
                    "all".to_string()
                } else {
                    p.to_string()
                },
                f / best
            );
        }
        println!("{line} GFLOP/s (1 thread, CPU time)");
    }
}
