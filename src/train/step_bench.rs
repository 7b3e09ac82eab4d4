//! Timing of one training step (zero grad, forward + backward, AdamW) of a GPT on random
//! tokens, the same work `scripts/torch_gpt_bench.py` times in PyTorch, and of a large GEMM
//! through [`crate::nn::matmul::matmul`] as the machine's f32 peak in the same run.
//!
//! FLOPs per step are the model's accounting (`model::accounting::flops_per_token`): the
//! matrix products forward and backward (2 per multiply-add), without the weight gradients
//! frozen Q/K skip, attention over the full `T x T` block as computed; element-wise work is
//! not counted. AdamW here uses torch's defaults (β₂ 0.999, weight decay 0.01, lr 1e-3) like
//! the reference script; no gradient clipping on either side.

use std::time::Instant;

use rand::Rng as _;

use super::adamw::{AdamW, AdamWConfig, groups_from};
use super::model_api::Trainable;
use crate::Result;
use crate::init::rng::seeded;
use crate::model::{Gpt, GptConfig};
use crate::nn::matmul::{Trans, matmul};

/// Timing of one configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StepTiming {
    /// Median milliseconds per step.
    pub ms_per_step: f64,
    /// Tokens per second at the median.
    pub tokens_per_s: f64,
    /// Counted FLOPs per step.
    pub flops_per_step: f64,
    /// Achieved GFLOP/s at the median.
    pub gflops: f64,
    /// Trainable parameters.
    pub trainable: usize,
    /// Loss of the last step (a sanity check that the step did real work).
    pub last_loss: f32,
}

/// Times `steps` training steps (after 3 warm-up steps) of `cfg` at batch `b`.
pub fn time_training_step(
    cfg: &GptConfig,
    b: usize,
    steps: usize,
    seed: u64,
) -> Result<StepTiming> {
    let t = cfg.context;
    let mut model = Gpt::new(cfg.clone(), seed)?;
    let n = model.params().data.len();
    let groups = groups_from(&model.param_parts(), n)?;
    let mut adam = AdamW::new(
        AdamWConfig {
            weight_decay: 0.01,
            beta2: 0.999,
            ..AdamWConfig::default()
        },
        n,
    );
    let mut rng = seeded(seed);
    let v = cfg.vocab_size as u32;
    let inputs: Vec<u32> = (0..b * t).map(|_| rng.random_range(0..v)).collect();
    let targets: Vec<u32> = (0..b * t).map(|_| rng.random_range(0..v)).collect();
    let mut times = Vec::with_capacity(steps);
    let mut last_loss = 0.0;
    for i in 0..steps + 3 {
        let start = Instant::now();
        model.zero_grad();
        last_loss = Trainable::forward_backward(&mut model, &inputs, &targets, b, t, i as u64)?;
        let (p, g) = model.params_and_grads();
        adam.step(p, g, &groups, 1e-3);
        if i >= 3 {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    let ms = median(&mut times) * 1e3;
    let flops = flops_per_step(cfg, b);
    Ok(StepTiming {
        ms_per_step: ms,
        tokens_per_s: (b * t) as f64 / (ms / 1e3),
        flops_per_step: flops,
        gflops: flops / (ms / 1e3) / 1e9,
        trainable: n,
        last_loss,
    })
}

/// Counted FLOPs of one training step: the model's accounting of matrix-product FLOPs per
/// token, forward + backward, times `B · T`.
pub fn flops_per_step(cfg: &GptConfig, b: usize) -> f64 {
    crate::model::accounting::flops_per_token(cfg, cfg.context).map_or(f64::NAN, |f| {
        (f.forward + f.backward) as f64 * (b as f64 * cfg.context as f64)
    })
}

/// GFLOP/s of an `n x n x n` f32 GEMM on `threads` threads (median of `reps`).
pub fn gemm_peak(n: usize, threads: usize, reps: usize) -> f64 {
    let a: Vec<f32> = (0..n * n)
        .map(|i| ((i % 97) as f32 - 48.0) * 0.01)
        .collect();
    let b = a.clone();
    let mut c = vec![0.0f32; n * n];
    matmul(
        &mut c,
        &a,
        Trans::No,
        &b,
        Trans::No,
        n,
        n,
        n,
        false,
        threads,
    );
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            matmul(
                &mut c,
                &a,
                Trans::No,
                &b,
                Trans::No,
                n,
                n,
                n,
                false,
                threads,
            );
            s.elapsed().as_secs_f64()
        })
        .collect();
    2.0 * (n as f64).powi(3) / median(&mut times) / 1e9
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        0.5 * (xs[m - 1] + xs[m])
    }
}
