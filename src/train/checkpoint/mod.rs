//! The training checkpoint folder:
//!
//! | file | holds |
//! |---|---|
//! | `model.safetensors` | the model, frozen weights included (`model::checkpoint`) |
//! | `optimizer.safetensors` | AdamW moments `m`, `v` (f32, one per trainable parameter) |
//! | `tokenizer.json` | the BPE tokenizer (Hugging Face format; BPE runs only) |
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

mod optimizer;
mod state;

use std::io::Write;
use std::path::Path;

use super::TrainError;
use super::metrics::{self, MetricRecord};
use super::options::TrainOptions;
use super::trainer::RunState;
use crate::data::Tokenizer;
use crate::data::bpe::BpeTokenizer;
use crate::data::char_level::CharTokenizer;
use crate::io::file_set::{self, FileSet, Recovery, SetLock};
use crate::model::Gpt;
use crate::{Error, Result};

pub use crate::io::file_set::sha256_hex;
pub use state::{DataRecord, StateFile, TokenizerRecord};

/// The model weights file.
pub const MODEL_FILE: &str = "model.safetensors";
/// The optimizer moments file.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// The BPE tokenizer file.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The metrics log.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The state file.
pub const STATE_FILE: &str = "state.json";
/// The hashes of the other files.
pub const MANIFEST_FILE: &str = "SHA256SUMS";
/// The file-set tag of a checkpoint (its temporary files are `.checkpoint.*`).
pub const SET_TAG: &str = "checkpoint";

/// What a loaded checkpoint holds besides the model.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The parsed `state.json`.
    pub state_file: StateFile,
    /// The run state to continue from.
    pub run: RunState,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
}

fn corrupt(dir: &Path, why: impl std::fmt::Display) -> Error {
    super::invalid(format!(
        "checkpoint {} is corrupt or incomplete: {why}; pass a folder written by \
         `orthoformer train --out`",
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
    let tokenizer = match parts.tokenizer {
        Tokenizer::Char(t) => TokenizerRecord::Char { vocab: t.vocab() },
        Tokenizer::Bpe(t) => {
            set.write_bytes(TOKENIZER_FILE, t.to_json()?.as_bytes())?;
            TokenizerRecord::Bpe {
                file: TOKENIZER_FILE.to_string(),
            }
        }
    };
    set.write(METRICS_FILE, |w| {
        metrics::write_records(w, &parts.run.metrics)
    })?;
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
    let _lock = SetLock::acquire_existing(dir, SET_TAG)?;
    recover_locked(dir)
}

fn recover_locked(dir: &Path) -> Result<Recovery> {
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
        .any(|f| {
            name.strip_prefix(&format!(".{f}."))
                .and_then(|r| r.strip_suffix(".tmp"))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        });
        if legacy || name == super::session::WRITE_TEST {
            let _ = std::fs::remove_file(entry.path());
        }
    }
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

/// Recovers, then reads and verifies everything but the model weights (the model file's hash
/// is checked, so the caller may load it next).
pub fn load(dir: &Path) -> Result<Loaded> {
    open(dir, false).map(|(loaded, _)| loaded)
}

/// [`load`] and the model, read once under the folder's lock, so both come from one
/// checkpoint even while a training run writes the next.
pub fn load_with_model(dir: &Path) -> Result<(Loaded, Gpt)> {
    let (loaded, model) = open(dir, true)?;
    let model = model.ok_or_else(|| corrupt(dir, "the model was not read"))?;
    if model.params().len() != loaded.run.adam.m.len() {
        return Err(corrupt(
            dir,
            format!(
                "{OPTIMIZER_FILE} has {} values per moment but the model {} parameters",
                loaded.run.adam.m.len(),
                model.params().len()
            ),
        ));
    }
    Ok((loaded, model))
}

fn open(dir: &Path, with_model: bool) -> Result<(Loaded, Option<Gpt>)> {
    if !dir.is_dir() {
        return Err(super::invalid(format!(
            "checkpoint {} is not a folder: pass the --out folder of `orthoformer train`",
            dir.display()
        )));
    }
    let _lock = SetLock::acquire_existing(dir, SET_TAG)?;
    recover_locked(dir)?;
    let read = |name: &str| {
        std::fs::read(dir.join(name))
            .map_err(|e| corrupt(dir, format!("{name} cannot be read ({e})")))
    };
    let state_bytes = read(STATE_FILE)?;
    let st: StateFile = serde_json::from_slice(&state_bytes)
        .map_err(|e| corrupt(dir, format!("{STATE_FILE} does not parse ({e})")))?;
    let hashes = expected_hashes(dir, &st, &state_bytes)?;
    let mut required = vec![MODEL_FILE, OPTIMIZER_FILE, METRICS_FILE];
    if matches!(st.tokenizer, TokenizerRecord::Bpe { .. }) {
        required.push(TOKENIZER_FILE);
    }
    for name in required {
        if !hashes.iter().any(|(n, _)| n == name) {
            return Err(corrupt(dir, format!("{name} is not among its files")));
        }
    }
    let mut model_bytes = None;
    for (name, want) in &hashes {
        let path = dir.join(name);
        let got = if with_model && name == MODEL_FILE {
            let bytes = read(name)?;
            let h = sha256_hex(&bytes);
            model_bytes = Some(bytes);
            h
        } else {
            file_set::hash_file(&path).map_err(|_| corrupt(dir, format!("{name} is missing")))?
        };
        if &got != want {
            return Err(corrupt(
                dir,
                format!("{name} is truncated or modified (SHA-256 differs)"),
            ));
        }
    }
    let (cfg, sampler_pos) = st
        .validate()
        .map_err(|why| corrupt(dir, format!("{STATE_FILE}: {why}")))?;
    let mut adam = crate::train::AdamW::new(st.options.adamw, 0);
    (adam.m, adam.v) = optimizer::read(&read(OPTIMIZER_FILE)?).map_err(|why| corrupt(dir, why))?;
    adam.t = st.adam_t;
    let tokenizer = match &st.tokenizer {
        TokenizerRecord::Char { vocab } => Tokenizer::Char(CharTokenizer::from_vocab(vocab)?),
        TokenizerRecord::Bpe { file } => {
            let json = String::from_utf8(read(file)?)
                .map_err(|_| corrupt(dir, format!("{file} is not UTF-8")))?;
            Tokenizer::Bpe(Box::new(BpeTokenizer::from_json(&json)?))
        }
    };
    if tokenizer.vocab_size() != cfg.vocab_size {
        return Err(corrupt(
            dir,
            format!(
                "the tokenizer has {} tokens but the model's vocab_size is {}",
                tokenizer.vocab_size(),
                cfg.vocab_size
            ),
        ));
    }
    let metrics: Vec<MetricRecord> = metrics::read_jsonl(&dir.join(METRICS_FILE))?;
    if metrics.iter().any(|r| r.step > st.step) {
        return Err(corrupt(
            dir,
            format!("{METRICS_FILE} has records past step {}", st.step),
        ));
    }
    let model = match model_bytes {
        Some(bytes) => {
            let model = crate::model::checkpoint::model_from_bytes(&bytes, &dir.join(MODEL_FILE))?;
            if model.config() != &cfg {
                return Err(corrupt(
                    dir,
                    format!("{MODEL_FILE} and {STATE_FILE} disagree on the model configuration"),
                ));
            }
            Some(model)
        }
        None => None,
    };
    let run = RunState {
        step: st.step,
        sampler_pos,
        adam,
        metrics,
        last_checkpoint: Some(st.step),
        window_loss: st.window_loss,
        window_steps: st.window_steps,
    };
    let loaded = Loaded {
        state_file: st,
        run,
        tokenizer,
    };
    Ok((loaded, model))
}

/// `(file, SHA-256)` the checkpoint must match: `SHA256SUMS` (version 2, which must cover
/// `state.json` itself) or state.json's own list (version 1, written before the manifest).
fn expected_hashes(
    dir: &Path,
    st: &StateFile,
    state_bytes: &[u8],
) -> Result<Vec<(String, String)>> {
    if st.version == state::VERSION_1 {
        let mut out = Vec::new();
        for (name, hash) in &st.files {
            file_set::check_name(dir, name).map_err(|e| corrupt(dir, e))?;
            out.push((name.clone(), hash.clone()));
        }
        return Ok(out);
    }
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| corrupt(dir, format!("{MANIFEST_FILE} cannot be read ({e})")))?;
    let mut hashes = file_set::parse_manifest(&path, &text).map_err(|e| corrupt(dir, e))?;
    let pos = hashes
        .iter()
        .position(|(n, _)| n == STATE_FILE)
        .ok_or_else(|| corrupt(dir, format!("{MANIFEST_FILE} does not list {STATE_FILE}")))?;
    if hashes[pos].1 != sha256_hex(state_bytes) {
        return Err(corrupt(
            dir,
            format!("{STATE_FILE} is truncated or modified (SHA-256 differs)"),
        ));
    }
    hashes.remove(pos);
    Ok(hashes)
}
