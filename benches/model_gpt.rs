//! Forward + backward time of the GPT: `tiny` and config A, softmax and
//! orthogonal attention, next to PyTorch (`scripts/torch_gpt_bench.py --fwd-bwd-only`) run in
//! the same process tree. Run: `cargo bench --bench model_gpt` (PyTorch is skipped, with a
//! note, when `python3` with torch is missing). Threads: rayon's default (all cores); PyTorch
//! gets the same count.

use orthoformer::model::{AttentionKind, Gpt, GptConfig};
use std::process::Command;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn rust_ms(cfg: &GptConfig, b: usize, steps: usize) -> f64 {
    let t = cfg.context;
    let mut m = Gpt::new(cfg.clone(), 0).expect("valid preset");
    let v = cfg.vocab_size as u32;
    let x: Vec<u32> = (0..(b * t) as u32).map(|i| (i * 7 + 1) % v).collect();
    let y: Vec<u32> = (0..(b * t) as u32).map(|i| (i * 13 + 5) % v).collect();
    let mut times = Vec::new();
    for i in 0..steps + 3 {
        let t0 = Instant::now();
        m.zero_grad();
        m.forward_backward(&x, &y, b, t, i as u64)
            .expect("batch fits");
        if i >= 3 {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    median(times)
}

fn torch_ms(cfg: &GptConfig, b: usize, steps: usize, frozen: bool, threads: usize) -> Option<f64> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/torch_gpt_bench.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script).args([
        "--layers",
        &cfg.n_layer.to_string(),
        "--d",
        &cfg.d_model.to_string(),
        "--heads",
        &cfg.n_head.to_string(),
        "--block",
        &cfg.context.to_string(),
        "--batch",
        &b.to_string(),
        "--vocab",
        &cfg.vocab_size.to_string(),
        "--steps",
        &steps.to_string(),
        "--threads",
        &threads.to_string(),
        "--fwd-bwd-only",
    ]);
    if frozen {
        cmd.arg("--frozen-qk");
    }
    let out = cmd.output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ms = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("median_ms="))?;
    ms.parse().ok()
}

fn main() {
    let threads = rayon::current_num_threads();
    let steps = 20;
    println!(
        "| model | attention | batch x T | Orthoformer ms | PyTorch ms | PyTorch / Orthoformer |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, b) in [("tiny", 16), ("config-a", 16)] {
        for kind in [AttentionKind::Softmax, AttentionKind::Orthogonal] {
            // The PyTorch baseline has no attention biases; match it.
            let cfg = GptConfig {
                attention: kind,
                attn_bias: false,
                ..GptConfig::preset(name).expect("preset")
            };
            let r = rust_ms(&cfg, b, steps);
            let p = torch_ms(&cfg, b, steps, kind.frozen_qk(), threads);
            let (ps, ratio) = match p {
                Some(p) => (format!("{p:.3}"), format!("{:.2}", p / r)),
                None => ("n/a (no torch)".into(), "-".into()),
            };
            println!(
                "| {name} | {} | {b} x {} | {r:.3} | {ps} | {ratio} |",
                kind.name(),
                cfg.context
            );
        }
    }
    println!("threads: {threads}");
}
