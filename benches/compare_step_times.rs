//! Milliseconds per training step of each attention variant at the shapes of the study in
//! docs/RESULTS.md (nanoGPT's CPU recipe, batch 12, 4 layers, 4 heads; widths 64-384 at
//! context 64, and width 128 at context 256), timed alone so the study's seconds-to-target can
//! be derived from a quiet machine's step cost instead of the shared machine's wall clock.
//!
//! `cargo bench --bench compare_step_times [-- ROUNDS]`: for each shape and variant,
//! the median of 30 steps (after 3 warm-up steps) in each round, best of ROUNDS (default 3).

use orthoformer::bench::step::time_training_step;
use orthoformer::model::{AttentionKind, GptConfig};
use orthoformer::train::recipe::recipe;

fn main() -> orthoformer::Result<()> {
    let rounds: usize = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let (base, options) = recipe("nanogpt-cpu")?;
    let all = [
        AttentionKind::Softmax,
        AttentionKind::Orthogonal,
        AttentionKind::Linear,
        AttentionKind::OrthogonalLinear,
        AttentionKind::OrthogonalTied,
        AttentionKind::IdentityQ,
        AttentionKind::OrthogonalHadamard,
    ];
    let two = [AttentionKind::Softmax, AttentionKind::Orthogonal];
    let shapes: [(usize, usize, &[AttentionKind]); 5] = [
        (128, 64, &all),
        (64, 64, &two),
        (256, 64, &two),
        (384, 64, &two),
        (128, 256, &two),
    ];
    println!("width context attention            ms/step (best of {rounds} rounds of 30 steps)");
    for (width, context, kinds) in shapes {
        for &attention in kinds {
            let cfg = GptConfig {
                d_model: width,
                d_ff: 4 * width,
                context,
                attention,
                ..base.clone()
            };
            let mut best = f64::MAX;
            for _ in 0..rounds {
                let t = time_training_step(&cfg, options.batch, 30, 0)?;
                best = best.min(t.ms_per_step);
            }
            println!(
                "{width:>5} {context:>7} {:<20} {best:>8.2}",
                attention.name()
            );
        }
    }
    Ok(())
}
