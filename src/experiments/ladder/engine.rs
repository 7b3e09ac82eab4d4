//! The Rust engine's run: one [`RunSpec`] trained on the library's GPT, resumable from its
//! checkpoint exactly as a comparison's run is, its curve evaluated on the held-out windows
//! during training, scored at the end, and written as `result.json`.
//!
//! The loop is the library's (`train::train_on`): batches are the seeded random windows of
//! the training range that NumPy draws (`NumpyBatches`, as the PyTorch engine draws them, so
//! both engines train on the same windows); each metrics record's `val_loss` (and `train_loss`:
//! a ladder run measures nothing else) is the mean loss on the curve's held-out windows; a
//! checkpoint is written at every curve point. Training seconds are the loop's own step times
//! (evaluations and checkpoints excluded): a record's `ms_per_step` times the steps since the
//! record before, summed. The final losses score whole windows in batches of `batch` windows
//! ([`score`]), the same rule as the curve's.

use std::path::Path;

use super::data::Tokens;
use super::plan::LadderPlan;
use super::result::{self, CurvePoint, RunResult};
use super::runs::RunSpec;
use crate::Result;
use crate::io::folder_kind::FolderKind;
use crate::model::{Gpt, GptConfig};
use crate::train::checkpoint::{self, DataRecord};
use crate::train::loop_eval::Evaluate;
use crate::train::run_record::RunRecord;
use crate::train::session::{Writer, check_training_fits, create_out};
use crate::train::token_batches::NumpyBatches;
use crate::train::{Limits, Observer, RunState, TrainError, Trainable, invalid};

/// `engine` of the results this engine writes.
pub const ENGINE: &str = "orthoformer-cpu";

/// What the run's checkpoints record as its data: the token folder, `train.bin`'s token
/// count (as its size) and the ladder's data hash.
fn data_record(plan: &LadderPlan) -> Result<DataRecord> {
    let rec = plan.recorded()?;
    Ok(DataRecord {
        source: plan.data.clone(),
        bytes: rec.train_tokens,
        sha256: rec.data_sha256.clone(),
    })
}

/// Trains (or continues) the run `spec` to its end or to `limits.stop_at`, and once at its
/// last step writes its `result.json`. Returns whether the run is finished.
pub fn train_one(
    plan: &LadderPlan,
    tokens: &Tokens,
    spec: &RunSpec,
    limits: Limits<'_>,
    progress: &mut dyn Observer<Gpt>,
    label: &str,
) -> Result<bool> {
    let dir = Path::new(&spec.dir);
    if result::read(dir, spec)?.is_some() {
        return Ok(true);
    }
    let options = spec.train_options(plan);
    let cfg: GptConfig = serde_json::from_value(spec.model.clone())
        .map_err(|e| invalid(format!("the run's model is not a GPT configuration: {e}")))?;
    let data = data_record(plan)?;
    let (mut model, state) = open(dir, &cfg, &options, spec.seed, &data)?;
    let [a, b] = spec.train_range;
    let train = tokens
        .train
        .get(a..b)
        .ok_or_else(|| invalid("the training range is outside train.bin"))?;
    let curve = tokens
        .train
        .get(spec.curve_range[0]..spec.curve_range[1])
        .ok_or_else(|| invalid("the curve's range is outside train.bin"))?;
    let end = limits.stop_at.map_or(spec.steps, |s| s.min(spec.steps));
    let state = if state.step < end {
        progress.start(label, spec.steps, state.step);
        // NumPy's draw, as the PyTorch engine (`orthoformer.ladder_run.RangeBatches`) and
        // its token-folder trainer draw: both engines train on the same windows.
        let mut batches = NumpyBatches::resume(train, spec.seed, state.sampler_pos);
        let mut eval = CurveEval {
            tokens: curve,
            batch: spec.batch,
        };
        let run = RunRecord {
            options: &options,
            tokenizer: &tokens.tokenizer,
            data: &data,
            model_seed: spec.seed,
            seq_len: spec.context,
        };
        let mut writer = Writer {
            dir,
            run,
            observer: progress,
        };
        match crate::train::train_on(
            &mut model,
            &mut batches,
            &mut eval,
            &options,
            spec.context,
            state,
            &mut writer,
            limits,
        ) {
            Ok(state) => state,
            // A rate this run cannot take: recorded as diverged, so the ladder finishes.
            Err(crate::Error::Train(TrainError::NonFinite {
                step, what, value, ..
            })) => {
                let why = format!("the {what} became {value} at step {step}");
                result::write(
                    dir,
                    &diverged(spec, &cfg, step.saturating_sub(1), Vec::new(), why),
                )?;
                return Ok(true);
            }
            Err(e) => return Err(e),
        }
    } else {
        state
    };
    if state.step < spec.steps {
        return Ok(false);
    }
    let r = finish(&mut model, tokens, spec, &cfg, &state)?;
    // The spread validation before the result: a run stopped between the two finishes again
    // from its last checkpoint and writes both.
    if r.diverged.is_none() {
        super::spread::write_for(plan, tokens, spec, &mut model)?;
    }
    result::write(dir, &r)?;
    Ok(true)
}

/// The result of `spec` stopped after `steps` steps with these final losses (held-out,
/// validation, transfer), training seconds and curve; `diverged` says why it stopped early.
fn record(
    spec: &RunSpec,
    steps: usize,
    seconds: f64,
    [heldout_loss, val_loss, transfer_loss]: [f64; 3],
    curve: Vec<CurvePoint>,
    diverged: Option<String>,
) -> RunResult {
    let steps = steps as u64;
    RunResult {
        format: result::FORMAT.to_string(),
        version: 1,
        engine: ENGINE.to_string(),
        device: device(),
        rung: spec.rung.clone(),
        variant: spec.variant.name().to_string(),
        seed: spec.seed,
        lr: spec.lr,
        params: spec.params,
        steps,
        tokens: steps.saturating_mul(spec.tokens_per_step),
        flops_per_step: spec.flops_per_step,
        flops: steps.saturating_mul(spec.flops_per_step),
        seconds,
        heldout_loss,
        val_loss,
        transfer_loss,
        curve,
        spec_sha256: Some(spec.fingerprint.clone()),
        diverged,
        val_spread_loss: None,
    }
}

/// The result of a run that diverged after `steps` steps (`why`): every loss at chance,
/// `ln V`, the finite points of its curve kept.
fn diverged(
    spec: &RunSpec,
    cfg: &GptConfig,
    steps: usize,
    curve: Vec<CurvePoint>,
    why: String,
) -> RunResult {
    let chance = (cfg.vocab_size.max(1) as f64).ln();
    let seconds = curve.last().map_or(0.0, |p| p.seconds);
    let curve = curve
        .into_iter()
        .filter(|p| p.heldout_loss.is_finite() && p.seconds.is_finite())
        .collect();
    record(spec, steps, seconds, [chance; 3], curve, Some(why))
}

/// The run's model and loop state: from its checkpoint, or fresh (the folder created). A
/// checkpoint of another run (other options, model, seed or data) is refused.
fn open(
    dir: &Path,
    cfg: &GptConfig,
    options: &crate::train::TrainOptions,
    seed: u64,
    data: &DataRecord,
) -> Result<(Gpt, RunState)> {
    crate::io::folder_kind::check(dir, FolderKind::Checkpoint)?;
    if checkpoint::exists(dir)? {
        let (loaded, model) = checkpoint::load_with_model(dir)?;
        let st = &loaded.state_file;
        if &st.options != options
            || model.config() != cfg
            || st.model_seed != seed
            || st.data.sha256 != data.sha256
        {
            return Err(invalid(format!(
                "{} holds a checkpoint of another run than the ladder asks for (options, model, \
                 seed or data differ); move it away and run the ladder again",
                dir.display()
            )));
        }
        return Ok((model, loaded.run));
    }
    cfg.validate()?;
    check_training_fits(cfg, options.batch, 0)?;
    let model = Gpt::new(cfg.clone(), seed)?;
    create_out(dir, FolderKind::Checkpoint)?;
    // The lock file exists before anything is staged, so readers always find it.
    drop(crate::io::file_set::SetLock::acquire(
        dir,
        checkpoint::SET_TAG,
    )?);
    let n = model.params().data.len();
    Ok((model, RunState::fresh(options, n)))
}

/// The finished run's result: its curve from the metrics records, its final losses (a final
/// loss that is not finite: the run diverged at its end).
fn finish(
    model: &mut Gpt,
    tokens: &Tokens,
    spec: &RunSpec,
    cfg: &GptConfig,
    state: &RunState,
) -> Result<RunResult> {
    let part = |all: &[u32], [a, b]: [usize; 2]| -> Result<Vec<u32>> {
        all.get(a..b)
            .map(<[u32]>::to_vec)
            .ok_or_else(|| invalid("a final range is outside its tokens"))
    };
    let fr = &spec.final_ranges;
    let (t, b) = (spec.context, spec.batch);
    let heldout = score(model, &part(&tokens.train, fr.heldout)?, t, b)?;
    let val = score(model, &part(&tokens.val, fr.val)?, t, b)?;
    let transfer = score(model, &part(&tokens.transfer, fr.transfer)?, t, b)?;
    let curve = curve(spec, &state.metrics);
    if let Some((what, loss)) = [
        ("held-out", heldout),
        ("validation", val),
        ("transfer", transfer),
    ]
    .into_iter()
    .find(|(_, l)| !l.is_finite())
    {
        let why = format!("the final {what} loss is {loss}");
        return Ok(diverged(spec, cfg, spec.steps, curve, why));
    }
    let seconds = curve.last().map_or(0.0, |p| p.seconds);
    Ok(record(
        spec,
        spec.steps,
        seconds,
        [heldout, val, transfer],
        curve,
        None,
    ))
}

/// The curve of a run from its metrics records (one per curve step).
fn curve(spec: &RunSpec, records: &[crate::train::MetricRecord]) -> Vec<CurvePoint> {
    let (mut seconds, mut prev) = (0.0f64, 0usize);
    records
        .iter()
        .map(|r| {
            let steps = r.step.saturating_sub(prev);
            seconds += r.ms_per_step.unwrap_or(0.0) * steps as f64 / 1e3;
            prev = r.step;
            let step = r.step as u64;
            CurvePoint {
                step,
                tokens: step.saturating_mul(spec.tokens_per_step),
                flops: step.saturating_mul(spec.flops_per_step),
                seconds,
                heldout_loss: f64::from(r.val_loss),
            }
        })
        .collect()
}

/// Mean loss per token of `model` on `tokens` (`k·t + 1` of them: `k` whole windows of `t`
/// inputs and their next tokens), `batch` windows per forward.
pub fn score<M: Trainable>(model: &mut M, tokens: &[u32], t: usize, batch: usize) -> Result<f64> {
    let k = tokens.len().saturating_sub(1) / t.max(1);
    if k == 0 {
        return Err(invalid(format!(
            "{} tokens hold no whole window of {t}",
            tokens.len()
        )));
    }
    let starts: Vec<usize> = (0..k).map(|w| w * t).collect();
    score_windows(model, tokens, &starts, t, batch)
}

/// Mean loss per token of `model` on the windows of `tokens` that start at `starts` (`t`
/// inputs and their next tokens each), `batch` windows per forward, in order. Not finite:
/// the caller records the run as diverged.
pub fn score_windows<M: Trainable>(
    model: &mut M,
    tokens: &[u32],
    starts: &[usize],
    t: usize,
    batch: usize,
) -> Result<f64> {
    let mut sum = 0.0f64;
    for chunk in starts.chunks(batch.max(1)) {
        let (mut inputs, mut targets) = (
            Vec::with_capacity(chunk.len() * t),
            Vec::with_capacity(chunk.len() * t),
        );
        for &s in chunk {
            let w = tokens
                .get(s..s + t + 1)
                .ok_or_else(|| invalid("a scored window is outside its tokens"))?;
            inputs.extend_from_slice(&w[..t]);
            targets.extend_from_slice(&w[1..]);
        }
        sum += f64::from(model.eval_loss(&inputs, &targets, chunk.len(), t)?) * chunk.len() as f64;
    }
    Ok(sum / starts.len().max(1) as f64)
}

/// The curve's evaluation: the held-out windows' mean loss, as both losses of a record.
struct CurveEval<'a> {
    tokens: &'a [u32],
    batch: usize,
}

impl Evaluate<Gpt> for CurveEval<'_> {
    fn losses(&mut self, model: &mut Gpt, _b: usize, t: usize) -> Result<(f32, f32)> {
        let loss = score(model, self.tokens, t, self.batch).unwrap_or(f64::NAN) as f32;
        Ok((loss, loss))
    }
}

/// What a run's `device` says on this engine: the processor (where the system names it) and
/// the threads the run had, e.g. `CPU (AMD EPYC, family 26 model 2), 1 thread`.
fn device() -> String {
    let threads = crate::nn::threads::current_threads();
    let cpu = crate::nn::threads::cpu_name().map_or(String::new(), |n| format!(" ({n})"));
    let s = if threads == 1 { "" } else { "s" };
    format!("CPU{cpu}, {threads} thread{s}")
}
