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

use crate::Result;
use crate::bench::options::BenchOptions;
use crate::bench::step_report::{StepBenchReport, StepBenchRow, StepTiming};
use crate::init::rng::seeded;
use crate::model::{Gpt, GptConfig};
use crate::nn::matmul::{Trans, matmul};
use crate::train::adamw::{AdamW, AdamWConfig, groups_from};
use crate::train::model_api::Trainable;

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
    let ms = crate::stats::median(&mut times) * 1e3;
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

/// A reference implementation's timing of one shape (PyTorch's, from the command line's
/// subprocess): median milliseconds per step and tokens per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReferenceStep {
    /// Median milliseconds per step.
    pub ms_per_step: f64,
    /// Tokens per second at that median.
    pub tokens_per_s: f64,
}

/// Times the reference on `(config, batch)`, or says why it cannot.
pub type ReferenceTimer<'a> =
    dyn FnMut(&GptConfig, usize) -> std::result::Result<ReferenceStep, String> + 'a;

/// `orthoformer bench` without `--model`: for `rounds` rounds, the GEMM peak, then every
/// (shape, variant) in Orthoformer and (with `reference`) in the reference back to back; each
/// side's best round is reported, so a burst of load from another process on a shared machine
/// disturbs neither side's figure. `threads` is the size of the pool the caller set up;
/// `measured` is called after each measurement (of `rounds · (rows + 1)`).
pub fn run_step_bench(
    opts: &BenchOptions,
    threads: usize,
    mut reference: Option<&mut ReferenceTimer<'_>>,
    measured: &mut dyn FnMut(),
) -> Result<StepBenchReport> {
    opts.validate_steps()?;
    let mut plan = Vec::new();
    for &shape in &opts.configs {
        for &kind in &opts.attention {
            plan.push((shape, shape.config(kind)?));
        }
    }
    let mut peaks = Vec::new();
    // Every round's figures per row (ours, the reference's), kept so the spread shows.
    let mut ours: Vec<Vec<StepTiming>> = vec![Vec::new(); plan.len()];
    let mut theirs: Vec<Vec<ReferenceStep>> = vec![Vec::new(); plan.len()];
    let mut errors: Vec<Option<String>> = vec![None; plan.len()];
    for _ in 0..opts.rounds() {
        peaks.push(gemm_peak(1024, threads, 10));
        measured();
        for (i, (shape, cfg)) in plan.iter().enumerate() {
            ours[i].push(time_training_step(cfg, shape.batch(), opts.steps, 0)?);
            if let Some(time) = reference.as_deref_mut() {
                match time(cfg, shape.batch()) {
                    Ok(t) => theirs[i].push(t),
                    Err(e) => errors[i] = errors[i].take().or(Some(e)),
                }
            }
            measured();
        }
    }
    let peak = peaks.iter().copied().fold(0.0f64, f64::max);
    let rows = plan
        .into_iter()
        .zip(ours)
        .zip(theirs.into_iter().zip(errors))
        .filter_map(|(((shape, cfg), ours), (theirs, error))| {
            let best = ours
                .iter()
                .min_by(|a, b| a.ms_per_step.total_cmp(&b.ms_per_step))?
                .clone();
            let torch = theirs
                .iter()
                .min_by(|a, b| a.ms_per_step.total_cmp(&b.ms_per_step))
                .copied();
            let tm = torch.map(|t| t.ms_per_step);
            Some(StepBenchRow {
                config: shape.label().to_string(),
                attention: cfg.attention.name().to_string(),
                batch: shape.batch(),
                context: cfg.context,
                gemm_peak_share: best.gflops / peak,
                speedup_vs_torch: tm.map(|t| t / best.ms_per_step),
                torch_gflops: tm.map(|t| best.flops_per_step / (t / 1e3) / 1e9),
                torch_ms_per_step: tm,
                torch_tokens_per_s: torch.map(|t| t.tokens_per_s),
                // A reference that ran in some round has a figure: its failures elsewhere
                // were outside load, not a missing reference.
                torch_error: if torch.is_some() { None } else { error },
                orthoformer_ms_rounds: ours.iter().map(|t| t.ms_per_step).collect(),
                torch_ms_rounds: theirs.iter().map(|t| t.ms_per_step).collect(),
                orthoformer: best,
            })
        })
        .collect();
    Ok(StepBenchReport {
        threads,
        gemm_peak_gflops: peak,
        gemm_peak_rounds: peaks,
        rows,
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
    2.0 * (n as f64).powi(3) / crate::stats::median(&mut times) / 1e9
}
