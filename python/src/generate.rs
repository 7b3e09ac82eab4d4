//! Text generation from a checkpoint or a pretrained model: the library's one operation,
//! [`orthoformer::infer::generate_job::run`], called with Python's arguments (the command line
//! calls the same, so both refuse the same inputs with the same messages). Ctrl-C stops a
//! generation between two tokens (`KeyboardInterrupt`, [`crate::interrupt::interruptible`]).

use std::path::PathBuf;

use pyo3::prelude::*;

use orthoformer::infer::TextModel;
use orthoformer::infer::generate::{MAX_NEW_TOKENS, SampleOptions};
use orthoformer::infer::generate_batch::{self, BatchJob, MAX_SEQUENCES};
use orthoformer::infer::generate_job::{self, GenerateJob};
use orthoformer::model::llama::KvDtype;
use orthoformer::train::checkpoint::load_text_model;

use crate::error::{OrPy, keyword, value};
use crate::interrupt::interruptible;

/// Continues `prompt` with the model of `checkpoint` (a training run's folder) or `model` (a
/// `.gguf` file or Hugging Face folder), exactly one of them. Settings left `None` take the
/// library's defaults. Returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (prompt="", checkpoint=None, model=None, max_new_tokens=None,
    temperature=None, top_k=None, top_p=None, seed=None, kv_cache=None, dot=None))]
#[allow(clippy::too_many_arguments)]
fn generate_text(
    py: Python<'_>,
    prompt: &str,
    checkpoint: Option<PathBuf>,
    model: Option<PathBuf>,
    max_new_tokens: Option<usize>,
    temperature: Option<f32>,
    top_k: Option<usize>,
    top_p: Option<f64>,
    seed: Option<u64>,
    kv_cache: Option<&str>,
    dot: Option<&str>,
) -> PyResult<String> {
    let job = settings(
        prompt,
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        kv_cache,
        dot,
    )?;
    let report = interruptible(py, |stop| match (checkpoint, model) {
        (None, Some(path)) => {
            let open = || Ok(TextModel::pretrained(&path, job.kv_cache())?.with_dot(job.dot()));
            generate_job::run_until(&job, open, None, stop).or_py()
        }
        (Some(dir), None) => {
            job.check_checkpoint().or_py()?;
            generate_job::run_until(&job, || load_text_model(&dir), None, stop).or_py()
        }
        _ => Err(value(
            "pass `checkpoint` (a training run's folder) or `model` (a .gguf file or a \
                 Hugging Face folder), one of them",
        )),
    })?;
    serde_json::to_string(&report).map_err(|e| value(e.to_string()))
}

/// The one-sequence job of Python's arguments, settings left `None` at the library's
/// defaults (names in messages as keywords).
#[allow(clippy::too_many_arguments)]
fn settings(
    prompt: &str,
    max_new_tokens: Option<usize>,
    temperature: Option<f32>,
    top_k: Option<usize>,
    top_p: Option<f64>,
    seed: Option<u64>,
    kv_cache: Option<&str>,
    dot: Option<&str>,
) -> PyResult<GenerateJob> {
    let d = GenerateJob::default();
    Ok(GenerateJob {
        prompt: prompt.to_string(),
        options: SampleOptions {
            max_new_tokens: max_new_tokens.unwrap_or(d.options.max_new_tokens),
            temperature: temperature.unwrap_or(d.options.temperature),
            top_k: top_k.unwrap_or(d.options.top_k),
            top_p: top_p.unwrap_or(d.options.top_p),
            seed: seed.unwrap_or(d.options.seed),
        },
        kv_cache: kv_cache
            .map(|name| {
                KvDtype::parse(name)
                    .map_err(|e| value(orthoformer::error::name_fields(&e, keyword)))
            })
            .transpose()?,
        dot: dot
            .map(|name| {
                name.parse()
                    .map_err(|e: String| value(orthoformer::error::name_fields(&e, keyword)))
            })
            .transpose()?,
    })
}

/// Continues every prompt of `prompts` (`parallel` sequences each, sequence `i` seeded
/// `seed + i`) in one batch of decode steps: the library's
/// [`generate_batch::run`], as `orthoformer generate` with several `--prompt`s runs it.
/// Returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (prompts, parallel=1, checkpoint=None, model=None, max_new_tokens=None,
    temperature=None, top_k=None, top_p=None, seed=None, kv_cache=None, dot=None))]
#[allow(clippy::too_many_arguments)]
fn generate_batch_text(
    py: Python<'_>,
    prompts: Vec<String>,
    parallel: usize,
    checkpoint: Option<PathBuf>,
    model: Option<PathBuf>,
    max_new_tokens: Option<usize>,
    temperature: Option<f32>,
    top_k: Option<usize>,
    top_p: Option<f64>,
    seed: Option<u64>,
    kv_cache: Option<&str>,
    dot: Option<&str>,
) -> PyResult<String> {
    let one = settings(
        "",
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        seed,
        kv_cache,
        dot,
    )?;
    let job = BatchJob {
        prompts,
        parallel,
        options: one.options,
        kv_cache: one.kv_cache,
        dot: one.dot,
    };
    job.validate().or_py()?;
    let report = interruptible(py, |stop| match (checkpoint, model) {
        (None, Some(path)) => {
            let open = || Ok(TextModel::pretrained(&path, one.kv_cache())?.with_dot(one.dot()));
            generate_batch::run(&job, open, stop, &mut |_| Ok(())).or_py()
        }
        (Some(dir), None) => {
            job.check_checkpoint().or_py()?;
            generate_batch::run(&job, || load_text_model(&dir), stop, &mut |_| Ok(())).or_py()
        }
        _ => Err(value(
            "pass `checkpoint` (a training run's folder) or `model` (a .gguf file or a \
                 Hugging Face folder), one of them",
        )),
    })?;
    serde_json::to_string(&report).map_err(|e| value(e.to_string()))
}

/// Adds this file's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(generate_text, m)?)?;
    m.add_function(wrap_pyfunction!(generate_batch_text, m)?)?;
    m.add("MAX_SEQUENCES", MAX_SEQUENCES)?;
    m.add("MAX_NEW_TOKENS", MAX_NEW_TOKENS)?;
    Ok(())
}
