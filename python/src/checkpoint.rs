//! Checkpoint folders (`orthoformer::train::checkpoint`), read and written only by the
//! library, so the Python package follows its format: `load_checkpoint` verifies a folder
//! (hashes, state, model file) and returns its state and model; `save_checkpoint` writes a
//! model trained elsewhere (PyTorch) as a folder `orthoformer eval`, `generate`, `theory` and
//! `train --resume` accept.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use orthoformer::data::Tokenizer;
use orthoformer::train::adamw::AdamW;
use orthoformer::train::checkpoint::DataRecord;
use orthoformer::train::session::{RunRecord, save_trained};
use orthoformer::train::{MetricRecord, RunState, TrainOptions};

use crate::convert::{f32_in, f32_out};
use crate::error::{OrPy, guard, value};
use crate::model::PyGpt;
use crate::train::PyData;

/// The loop state a trainer hands over at a checkpoint (JSON from Python).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoopState {
    /// Optimizer steps done.
    pub step: usize,
    /// The training sampler's position (a u128 as a decimal string).
    pub sampler_word_pos: String,
    /// AdamW steps taken.
    pub adam_t: u64,
    /// Sum of training losses since the last record.
    pub window_loss: f64,
    /// Steps since the last record.
    pub window_steps: usize,
    /// Evaluation records so far.
    pub metrics: Vec<MetricRecord>,
    /// Step of the last checkpoint written.
    #[serde(default)]
    pub last_checkpoint: Option<usize>,
}

impl LoopState {
    /// The state of `run` as sent to Python.
    pub(crate) fn of(run: &RunState) -> Self {
        LoopState {
            step: run.step,
            sampler_word_pos: run.sampler_pos.to_string(),
            adam_t: run.adam.t,
            window_loss: run.window_loss,
            window_steps: run.window_steps,
            metrics: run.metrics.clone(),
            last_checkpoint: run.last_checkpoint,
        }
    }

    /// Parses the JSON form.
    pub(crate) fn parse(json: &str) -> PyResult<Self> {
        serde_json::from_str(json).map_err(|e| value(format!("bad loop state: {e}")))
    }

    /// The library's run state, with AdamW moments `m`, `v` (f32 bytes, one per parameter;
    /// `None`: zeros) for `n` parameters.
    pub(crate) fn into_run(
        self,
        options: &TrainOptions,
        n: usize,
        moments: Option<(&[u8], &[u8])>,
    ) -> PyResult<RunState> {
        let sampler_pos = self
            .sampler_word_pos
            .parse::<u128>()
            .map_err(|_| value("sampler_word_pos is not a decimal integer"))?;
        let mut adam = AdamW::new(options.adamw, n);
        if let Some((m, v)) = moments {
            adam.m = f32_in(m, "AdamW m", Some(n))?;
            adam.v = f32_in(v, "AdamW v", Some(n))?;
        }
        adam.t = self.adam_t;
        Ok(RunState {
            step: self.step,
            sampler_pos,
            adam,
            metrics: self.metrics,
            last_checkpoint: self.last_checkpoint,
            window_loss: self.window_loss,
            window_steps: self.window_steps,
        })
    }
}

/// Parses training options (every field required, unknown fields rejected) and validates them.
/// `freeze_qk_after` is refused: the PyTorch trainer does not implement it, and must never
/// train a run other than the one its options describe.
pub(crate) fn parse_options(json: &str) -> PyResult<TrainOptions> {
    let o: TrainOptions =
        serde_json::from_str(json).map_err(|e| value(format!("bad training options: {e}")))?;
    o.validate().or_py()?;
    if let Some(n) = o.freeze_qk_after {
        return Err(value(format!(
            "freeze_qk_after {n}: the PyTorch trainer trains Q/K to the end; train or resume \
             this run with `orthoformer train`"
        )));
    }
    Ok(o)
}

/// Reads and verifies the checkpoint folder `dir`: returns its `state.json` (as the library
/// parsed it, JSON), the model, and the AdamW moments `m`, `v` (f32 bytes).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn load_checkpoint<'py>(
    py: Python<'py>,
    dir: PathBuf,
) -> PyResult<(
    String,
    PyGpt,
    Bound<'py, PyByteArray>,
    Bound<'py, PyByteArray>,
)> {
    let (loaded, model) = py.detach(|| {
        guard(|| {
            // One read of the model, verified against the manifest and the state.
            orthoformer::train::checkpoint::load_with_model(&dir).or_py()
        })
    })?;
    let state = serde_json::to_string(&loaded.state_file)
        .map_err(|e| value(format!("serialising state.json: {e}")))?;
    let (m, v) = (
        f32_out(py, &loaded.run.adam.m)?,
        f32_out(py, &loaded.run.adam.v)?,
    );
    Ok((state, PyGpt { inner: model }, m, v))
}

/// Writes `model` as the checkpoint folder `dir` (created), with the tokenizer and data
/// provenance of `data` and `run_json` = `{"options", "model_seed", "state"}`; `moments` are
/// the AdamW `m`, `v` (f32 bytes; `None`: zeros, a run that has not stepped).
#[pyfunction]
#[pyo3(signature = (dir, model, data, run_json, moments=None))]
fn save_checkpoint(
    py: Python<'_>,
    dir: PathBuf,
    model: &PyGpt,
    data: &PyData,
    run_json: &str,
    moments: Option<(Vec<u8>, Vec<u8>)>,
) -> PyResult<()> {
    let run: LoopRun =
        serde_json::from_str(run_json).map_err(|e| value(format!("bad checkpoint record: {e}")))?;
    let d = &data.inner;
    save_loop_run(py, &dir, model, &d.tokenizer, &d.data, run, moments)
}

/// What a Python trainer hands over at a checkpoint besides the model, its tokenizer and data
/// record: the options, the model's initialisation seed and the loop state.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoopRun {
    /// The training options.
    pub options: TrainOptions,
    /// Seed of the model's initialisation.
    pub model_seed: u64,
    /// The loop's state.
    pub state: LoopState,
}

/// Writes `model` at `run` as the library's checkpoint folder `dir`: the one writer both
/// Python savers (text and token folders) go through.
pub(crate) fn save_loop_run(
    py: Python<'_>,
    dir: &Path,
    model: &PyGpt,
    tokenizer: &Tokenizer,
    data: &DataRecord,
    run: LoopRun,
    moments: Option<(Vec<u8>, Vec<u8>)>,
) -> PyResult<()> {
    let n = model.inner.params().data.len();
    let moments = moments.as_ref().map(|(m, v)| (m.as_slice(), v.as_slice()));
    let state = run.state.into_run(&run.options, n, moments)?;
    let record = RunRecord {
        options: &run.options,
        tokenizer,
        data,
        model_seed: run.model_seed,
        seq_len: model.inner.config().context,
    };
    let gpt = &model.inner;
    py.detach(|| guard(|| save_trained(dir, &record, gpt, &state).or_py()))
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(save_checkpoint, m)?)?;
    Ok(())
}
