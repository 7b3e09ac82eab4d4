//! Decode wall and CPU time per token (CPU time from /proc/self/stat, all threads).
//!
//! Run: `cargo bench --bench decode_rate [-- MODEL.gguf [TOKENS [THREADS]]]`.
use orthoformer::model::llama::load_engine;
use std::time::Instant;
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}
fn main() {
    let path = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .unwrap_or("models/SmolLM2-135M-Instruct.Q4_1.gguf".into());
    let n: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(128);
    let threads: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .unwrap();
    let mut m = load_engine(std::path::Path::new(&path)).unwrap().model;
    let prompt: Vec<u32> = (0..256u32).map(|i| 1000 + i * 7919 % 48000).collect();
    let mut cache = m.new_cache(256 + n).unwrap();
    for round in 0..3 {
        cache.clear();
        let (t0, c0) = (Instant::now(), cpu_s());
        m.prefill(&prompt, &mut cache, 255).unwrap();
        let (t1, c1) = (Instant::now(), cpu_s());
        let mut tok = 1000;
        for _ in 0..n {
            let l = m.decode_one(tok, &mut cache).unwrap();
            tok = l
                .iter()
                .enumerate()
                .fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b })
                .0 as u32;
        }
        let (t2, c2) = (Instant::now(), cpu_s());
        println!(
            "round {round}: prefill {:.1} tok/s (cpu {:.2} s), decode {:.1} tok/s wall, {:.2} ms cpu/token, {:.0}% of {threads} cores",
            256.0 / (t1 - t0).as_secs_f64(),
            c1 - c0,
            n as f64 / (t2 - t1).as_secs_f64(),
            (c2 - c1) * 1e3 / n as f64,
            100.0 * (c2 - c1) / (t2 - t1).as_secs_f64() / threads as f64
        );
    }
}
