//! The training checkpoint folder:
//!
//! | file | holds |
//! |---|---|
//! | `model.safetensors` | the model, frozen weights included (`model::gpt::file`) |
//! | `optimizer.safetensors` | AdamW moments `m`, `v` (f32, one per trainable parameter) |
//! | `tokenizer.json` | the BPE, Hugging Face or (converted) tiktoken tokenizer, when there is one |
//! | `metrics.jsonl` | the evaluation records so far |
//! | `state.json` | step, sampler RNG position, options, model config, tokenizer, data |
//! | `SHA256SUMS` | the SHA-256 of every file above (`sha256sum -c SHA256SUMS` checks it) |
//!
//! The files are one `io::file_set` (tag `checkpoint`): a new checkpoint replaces all of them
//! at once, so a crash or a full disk at any moment leaves the previous checkpoint or the new
//! one, whole. Every open recovers first (finishing or undoing an interrupted write, removing
//! its temporary files) under the folder's lock `.checkpoint.lock`, which the training process
//! holds while it writes, so `eval` during training never sees a half-written set. Loading
//! then checks every hash (state.json's included) and every value of state.json.

pub mod eval;
mod load;
mod optimizer;
pub mod probes;
mod state;

use std::io::Write;
use std::path::Path;

use super::TrainError;
use super::metrics;
use super::options::TrainOptions;
use super::run_state::RunState;
use crate::data::Tokenizer;
use crate::io::file_set::{self, FileSet, Recovery, SetLock};
use crate::{Error, Result};

pub use crate::io::file_set::{is_sha256_hex, sha256_hex};
pub use load::{Loaded, load, load_text_model, load_with_model};
pub use state::{DataRecord, StateFile, TokenizerRecord};

/// The file that tests an output folder is writable (one fixed name, so a crash leaves at
/// most one, which the next checkpoint open removes).
pub const WRITE_TEST: &str = ".write-test";

/// The model weights file.
pub const MODEL_FILE: &str = "model.safetensors";
/// The optimizer moments file.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// The tokenizer file (BPE, Hugging Face, converted tiktoken).
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The metrics log.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The state file.
pub const STATE_FILE: &str = "state.json";
/// The hashes of the other files.
pub const MANIFEST_FILE: &str = "SHA256SUMS";
/// The file-set tag of a checkpoint (its temporary files are `.checkpoint.*`).
pub const SET_TAG: &str = "checkpoint";

pub(crate) fn corrupt(dir: &Path, why: impl std::fmt::Display) -> Error {
    super::invalid(format!(
        "checkpoint {} is corrupt or incomplete: {why}; pass the `out` folder \
         of a training run",
        dir.display()
    ))
}

/// Everything of a checkpoint except the model weights.
pub struct CheckpointParts<'a> {
    /// Run state.
    pub run: &'a RunState,
    /// Options.
    pub options: &'a TrainOptions,
    /// The model config as JSON.
    pub model: serde_json::Value,
    /// The model's initialisation seed.
    pub model_seed: u64,
    /// Sequence length.
    pub seq_len: usize,
    /// Tokenizer.
    pub tokenizer: &'a Tokenizer,
    /// Data provenance.
    pub data: &'a DataRecord,
}

/// Writes a checkpoint into `dir` (which must exist), replacing the previous one as a set.
/// `write_model` streams the model file. On failure the previous checkpoint is kept and the
/// error says which file could not be written and why.
pub fn save(
    dir: &Path,
    parts: &CheckpointParts<'_>,
    write_model: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let _lock = SetLock::acquire(dir, SET_TAG).map_err(|e| write_error(dir, e))?;
    recover_locked(dir)?;
    write_set(dir, parts, write_model).map_err(|e| write_error(dir, e))
}

fn write_set(
    dir: &Path,
    parts: &CheckpointParts<'_>,
    write_model: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut set = FileSet::begin(dir, SET_TAG)?;
    set.write(MODEL_FILE, |w| write_model(w))?;
    set.write(OPTIMIZER_FILE, |w| optimizer::write(w, &parts.run.adam))?;
    let file = TOKENIZER_FILE.to_string();
    let tokenizer = match parts.tokenizer {
        Tokenizer::Char(t) => TokenizerRecord::Char { vocab: t.vocab() },
        Tokenizer::Ids(t) => TokenizerRecord::Ids {
            vocab_size: t.vocab_size(),
        },
        Tokenizer::Bpe(t) => {
            set.write_bytes(TOKENIZER_FILE, t.to_json()?.as_bytes())?;
            TokenizerRecord::Bpe { file }
        }
        Tokenizer::Hf {
            tokenizer: t,
            tiktoken,
        } => {
            set.write_bytes(TOKENIZER_FILE, t.to_json()?.as_bytes())?;
            match tiktoken {
                Some(name) => TokenizerRecord::Tiktoken {
                    name: name.clone(),
                    file,
                },
                None => TokenizerRecord::Hf { file },
            }
        }
    };
    // Nothing is committed that its readers would refuse: the metrics must read back as the
    // records they are (a NaN would be written as `null` and never parse again).
    let mut metrics_bytes = Vec::new();
    metrics::write_records(&mut metrics_bytes, &parts.run.metrics)
        .map_err(|e| Error::io(dir.join(METRICS_FILE), e))?;
    let text = String::from_utf8_lossy(&metrics_bytes);
    let back = metrics::parse_jsonl(&text, &dir.join(METRICS_FILE))?;
    if back != parts.run.metrics {
        return Err(super::invalid(format!(
            "{METRICS_FILE} would not read back as written (a loss is not finite?); the \
             previous checkpoint in {} is kept",
            dir.display()
        )));
    }
    set.write_bytes(METRICS_FILE, &metrics_bytes)?;
    let state = StateFile {
        format: state::FORMAT.to_string(),
        version: state::VERSION,
        step: parts.run.step,
        sampler_word_pos: parts.run.sampler_pos.to_string(),
        adam_t: parts.run.adam.t,
        window_loss: parts.run.window_loss,
        window_steps: parts.run.window_steps,
        options: parts.options.clone(),
        model: parts.model.clone(),
        model_seed: parts.model_seed,
        seq_len: parts.seq_len,
        tokenizer,
        data: parts.data.clone(),
        files: Default::default(),
    };
    let json = serde_json::to_vec_pretty(&state)
        .map_err(|e| super::invalid(format!("serialising state.json: {e}")))?;
    // The state must pass the readers' validation before it is committed.
    let back: StateFile = serde_json::from_slice(&json)
        .map_err(|e| super::invalid(format!("state.json would not read back ({e})")))?;
    back.validate().map_err(|why| {
        super::invalid(format!(
            "the checkpoint's {STATE_FILE} would be refused by its readers ({why}); the \
             previous checkpoint in {} is kept",
            dir.display()
        ))
    })?;
    set.write_bytes(STATE_FILE, &json)?;
    let manifest = file_set::manifest_text(set.files());
    set.write_bytes(MANIFEST_FILE, manifest.as_bytes())?;
    set.commit()
}

/// A failed write as one line: which file, the system's reason, and that nothing was lost.
fn write_error(dir: &Path, e: Error) -> Error {
    let Error::Io { path, source } = &e else {
        return e;
    };
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    TrainError::CheckpointWrite {
        dir: dir.to_path_buf(),
        why: format!("{file}: {source}"),
    }
    .into()
}

/// Brings `dir` to a whole checkpoint (or none) after a crash: finishes a committed write,
/// undoes an uncommitted one and removes temporary files, under the folder's lock.
pub fn recover(dir: &Path) -> Result<Recovery> {
    let _lock = reader_lock(dir)?;
    recover_locked(dir)
}

/// The folder's lock for a reader: the existing lock file, waited for while a writer holds it;
/// created when a write is pending and there is none yet (a folder from before the lock). A
/// writer creates the lock file before its first staged file (`Session`, [`save`]), so "no lock
/// file and nothing pending" means no write of this version can be under way, and then a
/// reader of a read-only folder needs no lock at all.
pub fn reader_lock(dir: &Path) -> Result<Option<SetLock>> {
    if SetLock::path(dir, SET_TAG).exists() {
        return SetLock::acquire_existing(dir, SET_TAG);
    }
    if file_set::pending_tags(dir)?.iter().any(|t| t == SET_TAG) {
        return SetLock::acquire(dir, SET_TAG).map(Some);
    }
    Ok(None)
}

/// Recovery proper; the caller holds the lock (or none exists and nothing is pending).
pub(crate) fn recover_locked(dir: &Path) -> Result<Recovery> {
    let r = file_set::recover(dir, SET_TAG)?;
    // Temporary files of versions that replaced one file at a time (`.NAME.PID.tmp`), and of
    // the output folder's write test.
    for entry in std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let legacy = [
            MODEL_FILE,
            OPTIMIZER_FILE,
            TOKENIZER_FILE,
            METRICS_FILE,
            STATE_FILE,
        ]
        .iter()
        .any(|f| crate::io::atomic::temporary_pid(&name, f).is_some());
        let write_test = name.strip_prefix(WRITE_TEST).is_some_and(|r| {
            r.is_empty()
                || r.strip_prefix('-')
                    .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
        });
        if legacy || write_test {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    // The folder marker's copy from a `claim` killed midway (`..orthoformer.PID.tmp`); the
    // marker is written outside the lock, so a live claimer's copy stays.
    crate::io::atomic::remove_stale_temporaries(dir, crate::io::folder_kind::MARKER);
    Ok(r)
}

/// Whether `dir` holds a checkpoint, after recovering it.
pub fn exists(dir: &Path) -> Result<bool> {
    if !dir.is_dir() {
        return Ok(false);
    }
    recover(dir)?;
    Ok(dir.join(STATE_FILE).is_file())
}
