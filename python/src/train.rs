//! Training runs (`orthoformer::train`, `orthoformer::data`) for a trainer written in Python:
//! the defaults of `orthoformer train`, the tokenized data (`Data`), the seeded batch sampler
//! (`BatchSampler`), the learning-rate schedule, and `Session`: a fresh run checked and set up
//! (or a checkpoint reopened and verified) exactly as `orthoformer train` does it, which then
//! writes the library's checkpoints from the state the Python loop hands it.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use orthoformer::data::{BatchSampler, Corpus, TokenizerKind};
use orthoformer::train::TrainOptions;
use orthoformer::train::options::{
    DEFAULT_BPE_VOCAB, DEFAULT_CONTEXT, DEFAULT_PRESET, tokenizer_choice,
};
use orthoformer::train::session::{
    FreshSpec, Prepared, RunRecord, Session, prepare, write_checkpoint,
};
use orthoformer::train::trainer::EVAL_SEED_OFFSET;

use crate::checkpoint::{LoopState, parse_options};
use crate::convert::{f32_in, f32_out, u32_in, u32_out};
use crate::error::{OrPy, guard, value};
use crate::model::{frozen_rows, parse_config, tensor_table};

/// The defaults of `orthoformer train` (from the library, so they cannot drift), as JSON:
/// `{"options": TrainOptions, "preset", "context", "bpe_vocab", "recipes"}`.
#[pyfunction]
fn train_defaults() -> PyResult<String> {
    let report = serde_json::json!({
        "options": TrainOptions::default(),
        "preset": DEFAULT_PRESET,
        "context": DEFAULT_CONTEXT,
        "bpe_vocab": DEFAULT_BPE_VOCAB,
        "recipes": orthoformer::train::recipe::RECIPES,
    });
    Ok(report.to_string())
}

/// This process's peak resident memory in bytes (`VmHWM`), as metrics records carry it;
/// `None` where the system does not report it.
#[pyfunction]
fn peak_rss_bytes() -> Option<u64> {
    orthoformer::io::rss::peak_rss_bytes()
}

/// A named recipe (`nanogpt-cpu`): its model and its training options, as JSON.
#[pyfunction]
fn recipe(name: &str) -> PyResult<(String, String)> {
    let (model, options) = orthoformer::train::recipe::recipe(name).or_py()?;
    let json = |v: serde_json::Result<String>| v.map_err(|e| value(e.to_string()));
    Ok((
        json(serde_json::to_string(&model))?,
        json(serde_json::to_string(&options))?,
    ))
}

/// Options checked and written back in the library's JSON form.
#[pyfunction]
fn options_check(options_json: &str) -> PyResult<String> {
    serde_json::to_string(&parse_options(options_json)?).map_err(|e| value(e.to_string()))
}

/// The learning rate of step `step` (0-based) under the options' warm-up + cosine schedule.
#[pyfunction]
fn schedule_lr(options_json: &str, step: usize) -> PyResult<f64> {
    Ok(parse_options(options_json)?.schedule().lr(step))
}

/// The tokenizer kind and BPE size as `orthoformer train` reads `--tokenizer`/`--vocab-size`
/// (the library's one rule).
fn tokenizer_kind(name: &str, vocab_size: Option<usize>) -> PyResult<(TokenizerKind, usize)> {
    let kind = name.parse::<TokenizerKind>().or_py()?;
    tokenizer_choice(Some(kind), vocab_size).or_py()
}

/// A text tokenized and split 90/10, with its tokenizer and provenance.
#[pyclass(name = "Data", module = "orthoformer._native")]
pub(crate) struct PyData {
    pub(crate) inner: Prepared,
}

#[pymethods]
impl PyData {
    /// Reads `path` (default: the embedded TinyShakespeare), trains the tokenizer (`char` or
    /// `bpe` of `vocab_size`) and splits the tokens, checking that a window of `context + 1`
    /// tokens fits.
    #[new]
    #[pyo3(signature = (path=None, tokenizer="char", vocab_size=None, context=DEFAULT_CONTEXT))]
    fn new(
        py: Python<'_>,
        path: Option<PathBuf>,
        tokenizer: &str,
        vocab_size: Option<usize>,
        context: usize,
    ) -> PyResult<Self> {
        let (kind, vocab) = tokenizer_kind(tokenizer, vocab_size)?;
        let inner = py.detach(|| {
            guard(|| {
                let corpus = Corpus::load_or_default(path.as_deref()).or_py()?;
                prepare(&corpus, kind, vocab, context).or_py()
            })
        })?;
        Ok(PyData { inner })
    }

    /// Vocabulary size.
    fn vocab_size(&self) -> usize {
        self.inner.tokenizer.vocab_size()
    }

    /// `char` or `bpe`.
    fn tokenizer_kind(&self) -> String {
        self.inner.tokenizer.name()
    }

    /// Where the text came from, its size and SHA-256, as JSON.
    fn record_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner.data).map_err(|e| value(e.to_string()))
    }

    /// Token ids of `text` (u32 bytes).
    fn encode<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyByteArray>> {
        let ids = self.inner.tokenizer.encode(text).or_py()?;
        u32_out(py, &ids)
    }

    /// The text of token ids (u32 bytes).
    fn decode(&self, ids: &[u8]) -> PyResult<String> {
        let ids = u32_in(ids, "token ids", None)?;
        self.inner.tokenizer.decode(&ids).or_py()
    }

    /// The `train` or `val` tokens (u32 bytes).
    fn tokens<'py>(&self, py: Python<'py>, split: &str) -> PyResult<Bound<'py, PyByteArray>> {
        u32_out(py, self.split(split)?)
    }
}

impl PyData {
    fn split(&self, which: &str) -> PyResult<&[u32]> {
        match which {
            "train" => Ok(&self.inner.split.train),
            "val" => Ok(&self.inner.split.val),
            other => Err(value(format!("split {other:?}: use train or val"))),
        }
    }
}

/// The library's seeded batch sampler: `B` windows of `T + 1` tokens at uniformly random
/// offsets; its position can be saved and restored.
#[pyclass(name = "BatchSampler", module = "orthoformer._native")]
struct PyBatchSampler {
    inner: BatchSampler,
}

#[pymethods]
impl PyBatchSampler {
    /// A sampler seeded with `seed`, at `word_pos` (a u128 as a decimal string) when given.
    #[new]
    #[pyo3(signature = (seed, word_pos=None))]
    fn new(seed: u64, word_pos: Option<&str>) -> PyResult<Self> {
        let inner = match word_pos {
            None => BatchSampler::new(seed),
            Some(p) => {
                let pos = p
                    .parse::<u128>()
                    .map_err(|_| value(format!("word_pos {p:?} is not a decimal integer")))?;
                BatchSampler::restore(seed, pos)
            }
        };
        Ok(PyBatchSampler { inner })
    }

    /// The generator's position (a u128 as a decimal string).
    fn word_pos(&self) -> String {
        self.inner.word_pos().to_string()
    }

    /// The next batch from `data`'s `split`: `(inputs, targets)`, each `b x t` u32 bytes.
    #[allow(clippy::type_complexity)]
    fn next_batch<'py>(
        &mut self,
        py: Python<'py>,
        data: &PyData,
        split: &str,
        b: usize,
        t: usize,
    ) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyByteArray>)> {
        let tokens = data.split(split)?;
        crate::convert::checked_numel(&[b, t, 2], 4)?;
        if b == 0 || t == 0 || tokens.len() <= t {
            return Err(value(format!(
                "cannot draw a {b} x {t} batch from the {} {split} tokens",
                tokens.len()
            )));
        }
        let batch = self.inner.next_batch(tokens, b, t);
        Ok((u32_out(py, &batch.inputs)?, u32_out(py, &batch.targets)?))
    }
}

/// A training run as `orthoformer train` sets it up: checked, model built (or restored), data
/// tokenized and split; it writes the library's checkpoints for a loop run elsewhere.
#[pyclass(name = "Session", module = "orthoformer._native")]
struct PySession {
    inner: Session,
}

#[pymethods]
impl PySession {
    /// A fresh run into `out` (created; it must not hold a checkpoint): the text at `data`
    /// (default TinyShakespeare), `tokenizer` (`char`/`bpe`, `vocab_size`), the model of
    /// `config_json` (vocabulary replaced by the tokenizer's) initialised from `model_seed`,
    /// and `options_json`. Nothing is written when a check fails.
    #[staticmethod]
    #[pyo3(signature = (out, config_json, options_json, model_seed, data=None, tokenizer="char", vocab_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn fresh(
        py: Python<'_>,
        out: PathBuf,
        config_json: &str,
        options_json: &str,
        model_seed: u64,
        data: Option<PathBuf>,
        tokenizer: &str,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let (kind, vocab) = tokenizer_kind(tokenizer, vocab_size)?;
        let spec = FreshSpec {
            model: serde_json::from_str(config_json)
                .map_err(|e| value(format!("bad model config: {e}")))?,
            model_seed,
            options: parse_options(options_json)?,
        };
        let inner = py.detach(|| {
            guard(|| {
                let corpus = Corpus::load_or_default(data.as_deref()).or_py()?;
                Session::fresh(&corpus, kind, vocab, spec, &out).or_py()
            })
        })?;
        Ok(PySession { inner })
    }

    /// Reopens the checkpoint in `out` (verified), with the text at `data` when given (it
    /// must be the one trained on), `steps` extending the run, and `config_json` a model the
    /// caller asked for, which must equal the checkpoint's.
    #[staticmethod]
    #[pyo3(signature = (out, data=None, steps=None, config_json=None))]
    fn resume(
        py: Python<'_>,
        out: PathBuf,
        data: Option<PathBuf>,
        steps: Option<usize>,
        config_json: Option<&str>,
    ) -> PyResult<Self> {
        let requested = config_json.map(parse_config).transpose()?;
        let inner = py.detach(|| {
            guard(|| {
                let corpus = data.as_deref().map(Corpus::load).transpose().or_py()?;
                Session::resume(&out, corpus, steps, requested.as_ref()).or_py()
            })
        })?;
        Ok(PySession { inner })
    }

    /// The model configuration as JSON.
    fn config_json(&self) -> PyResult<String> {
        serde_json::to_string(self.inner.model.config()).map_err(|e| value(e.to_string()))
    }

    /// The options as JSON.
    fn options_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner.options).map_err(|e| value(e.to_string()))
    }

    /// Seed of the model's initialisation.
    fn model_seed(&self) -> u64 {
        self.inner.model_seed
    }

    /// The seed of the evaluation batches (the trainer's own rule).
    fn eval_seed(&self) -> u64 {
        self.inner.options.seed.wrapping_add(EVAL_SEED_OFFSET)
    }

    /// The tokenized data (a copy).
    fn data(&self) -> PyData {
        PyData {
            inner: self.inner.prepared.clone(),
        }
    }

    /// The trainable tensors `(name, shape, offset, decay)` in buffer order.
    fn tensors(&self) -> Vec<(String, Vec<usize>, usize, bool)> {
        tensor_table(&self.inner.model)
    }

    /// The model's trainable parameters, flat (f32 bytes): the initialisation of a fresh run,
    /// the checkpoint's weights of a resumed one.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyByteArray>> {
        f32_out(py, &self.inner.model.params().data)
    }

    /// The model's frozen tensors (see `frozen_weights`): regenerated from the config's seed
    /// for a fresh run, as the checkpoint verified them for a resumed one.
    #[allow(clippy::type_complexity)]
    fn frozen<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<
        Vec<(
            String,
            Vec<usize>,
            Bound<'py, PyByteArray>,
            Option<(Bound<'py, PyByteArray>, Vec<usize>)>,
        )>,
    > {
        frozen_rows(py, self.inner.model.frozen())
    }

    /// The loop state (JSON: step, sampler position, AdamW step, loss window, metrics).
    fn state_json(&self) -> PyResult<String> {
        serde_json::to_string(&LoopState::of(&self.inner.state)).map_err(|e| value(e.to_string()))
    }

    /// The AdamW moments `(m, v)` (f32 bytes, buffer order).
    #[allow(clippy::type_complexity)]
    fn adam_moments<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyByteArray>)> {
        let a = &self.inner.state.adam;
        Ok((f32_out(py, &a.m)?, f32_out(py, &a.v)?))
    }

    /// Writes a checkpoint of the run: `params` (f32 bytes, buffer order), the loop state
    /// (JSON, see `state_json`) and the AdamW moments `m`, `v`.
    fn save(
        &mut self,
        py: Python<'_>,
        params: &[u8],
        state_json: &str,
        adam_m: &[u8],
        adam_v: &[u8],
    ) -> PyResult<()> {
        let n = self.inner.model.params().data.len();
        let values = f32_in(params, "parameters", Some(n))?;
        let state = LoopState::parse(state_json)?.into_run(
            &self.inner.options,
            n,
            Some((adam_m, adam_v)),
        )?;
        self.inner.model.params_mut().data.copy_from_slice(&values);
        let s = &self.inner;
        let record = RunRecord {
            options: &s.options,
            tokenizer: &s.prepared.tokenizer,
            data: &s.prepared.data,
            model_seed: s.model_seed,
            seq_len: s.model.config().context,
        };
        py.detach(|| guard(|| write_checkpoint(&s.out, &record, &s.model, &state).or_py()))
    }
}

/// Adds this file's functions and classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(train_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(options_check, m)?)?;
    m.add_function(wrap_pyfunction!(recipe, m)?)?;
    m.add_function(wrap_pyfunction!(peak_rss_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(schedule_lr, m)?)?;
    m.add_class::<PyData>()?;
    m.add_class::<PyBatchSampler>()?;
    m.add_class::<PySession>()?;
    Ok(())
}
