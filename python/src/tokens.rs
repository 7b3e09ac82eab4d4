//! Checkpoints of models trained on pre-tokenized data (`python -m orthoformer.prepare`,
//! `python -m orthoformer.train --data-dir`): the tokenizer arrives as a record instead of a
//! text the library tokenized itself, `{"kind": "hf", "json": TEXT}`, `{"kind": "tiktoken",
//! "name": NAME, "json": TEXT}` (the encoding converted to a Hugging Face tokenizer) or
//! `{"kind": "ids", "vocab_size": V}`, and the data record names the token folder. The
//! checkpoint written is the library's own, which `orthoformer eval` and `generate` read.
//! `Tokenizer` also takes a checkpoint's own records (`{"kind": "char", "vocab": ...}`,
//! `{"kind": "bpe", "json": TEXT}`), so Python decodes any checkpoint's ids as the CLI does.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use orthoformer::data::Tokenizer;
use orthoformer::data::char_level::CharTokenizer;
use orthoformer::data::hf::HfTokenizer;
use orthoformer::data::ids::IdsTokenizer;
use orthoformer::train::checkpoint::DataRecord;

use crate::checkpoint::{LoopRun, LoopState, save_loop_run};
use crate::convert::{u32_in, u32_out};
use crate::error::{OrPy, value};
use crate::model::PyGpt;

/// A tokenizer record as Python sends it.
#[derive(serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum Spec {
    Char { vocab: String },
    Bpe { json: String },
    Hf { json: String },
    Tiktoken { name: String, json: String },
    Ids { vocab_size: usize },
}

/// The library's tokenizer of a record (see the module doc).
fn tokenizer(spec_json: &str) -> PyResult<Tokenizer> {
    let spec: Spec =
        serde_json::from_str(spec_json).map_err(|e| value(format!("bad tokenizer record: {e}")))?;
    Ok(match spec {
        Spec::Char { vocab } => Tokenizer::Char(CharTokenizer::from_vocab(&vocab).or_py()?),
        Spec::Bpe { json } => Tokenizer::Bpe(Box::new(HfTokenizer::from_json(&json).or_py()?)),
        Spec::Hf { json } => Tokenizer::Hf {
            tokenizer: Box::new(HfTokenizer::from_json(&json).or_py()?),
            tiktoken: None,
        },
        Spec::Tiktoken { name, json } => {
            if name.is_empty() {
                return Err(value("the tiktoken encoding needs a name"));
            }
            Tokenizer::Hf {
                tokenizer: Box::new(HfTokenizer::from_json(&json).or_py()?),
                tiktoken: Some(name),
            }
        }
        Spec::Ids { vocab_size } => Tokenizer::Ids(IdsTokenizer::new(vocab_size).or_py()?),
    })
}

/// A tokenizer from its record, as the checkpoint will hold it: encodes, decodes and names
/// itself exactly as `orthoformer generate` and `eval` will.
#[pyclass(name = "Tokenizer", module = "orthoformer._native")]
struct PyTokenizer {
    inner: Tokenizer,
}

#[pymethods]
impl PyTokenizer {
    /// Builds the tokenizer of the record `spec_json`.
    #[new]
    fn new(spec_json: &str) -> PyResult<Self> {
        Ok(PyTokenizer {
            inner: tokenizer(spec_json)?,
        })
    }

    /// Vocabulary size.
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// `hf`, `tiktoken:NAME` or `ids`.
    fn name(&self) -> String {
        self.inner.name()
    }

    /// Token ids of `text` (u32 bytes).
    fn encode<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyByteArray>> {
        u32_out(py, &self.inner.encode(text).or_py()?)
    }

    /// The text of token ids (u32 bytes).
    fn decode(&self, ids: &[u8]) -> PyResult<String> {
        self.inner.decode(&u32_in(ids, "token ids", None)?).or_py()
    }
}

/// What `save_token_checkpoint` records besides model and tokenizer.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RunJson {
    options: orthoformer::train::TrainOptions,
    model_seed: u64,
    data: DataRecord,
    state: LoopState,
}

/// Writes `model` as the checkpoint folder `dir` (created when missing) with the tokenizer
/// of the record `tokenizer_json` and `run_json` = `{"options", "model_seed", "data",
/// "state"}`; `moments` are the AdamW `m`, `v` (f32 bytes; `None`: zeros).
#[pyfunction]
#[pyo3(signature = (dir, model, tokenizer_json, run_json, moments=None))]
fn save_token_checkpoint(
    py: Python<'_>,
    dir: PathBuf,
    model: &PyGpt,
    tokenizer_json: &str,
    run_json: &str,
    moments: Option<(Vec<u8>, Vec<u8>)>,
) -> PyResult<()> {
    let tok = tokenizer(tokenizer_json)?;
    let run: RunJson =
        serde_json::from_str(run_json).map_err(|e| value(format!("bad checkpoint record: {e}")))?;
    let loop_run = LoopRun {
        options: run.options,
        model_seed: run.model_seed,
        state: run.state,
    };
    save_loop_run(py, &dir, model, &tok, &run.data, loop_run, moments)
}

/// Adds this file's functions and classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(save_token_checkpoint, m)?)?;
    m.add_class::<PyTokenizer>()?;
    Ok(())
}
