//! Opening a checkpoint folder: recover it under its lock, check every hash (state.json's
//! through `SHA256SUMS`) and every value of state.json, then read the optimizer moments, the
//! tokenizer, the metrics and, on request, the model, all from the one checkpoint the folder
//! holds at that moment.

use std::path::Path;

use super::super::metrics::{self, MetricRecord};
use super::super::run_state::RunState;
use super::state::{self, StateFile, TokenizerRecord};
use super::{
    MANIFEST_FILE, METRICS_FILE, MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, TOKENIZER_FILE, corrupt,
    optimizer, reader_lock, recover_locked, sha256_hex,
};
use crate::Result;
use crate::data::Tokenizer;
use crate::data::char_level::CharTokenizer;
use crate::data::hf::HfTokenizer;
use crate::data::ids::IdsTokenizer;
use crate::infer::TextModel;
use crate::io::file_set;
use crate::model::Gpt;

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

/// The checkpoint's model with its tokenizer, ready to generate ([`load_with_model`]; a
/// checkpoint declares no special tokens).
pub fn load_text_model(dir: &Path) -> Result<TextModel<Gpt>> {
    let (loaded, model) = load_with_model(dir)?;
    Ok(TextModel {
        model,
        tokenizer: loaded.tokenizer,
        special: Default::default(),
    })
}

fn open(dir: &Path, with_model: bool) -> Result<(Loaded, Option<Gpt>)> {
    if !dir.is_dir() {
        return Err(crate::train::invalid(format!(
            "checkpoint {} is not a folder: pass the `out` folder of a training run",
            dir.display()
        )));
    }
    let _lock = reader_lock(dir)?;
    recover_locked(dir)?;
    let read = |name: &str| {
        crate::io::safe_file::read_in(dir, name)
            .map_err(|e| corrupt(dir, format!("{name} cannot be read ({e})")))
    };
    let state_bytes = read(STATE_FILE)?;
    let st: StateFile = serde_json::from_slice(&state_bytes)
        .map_err(|e| corrupt(dir, format!("{STATE_FILE} does not parse ({e})")))?;
    let hashes = expected_hashes(dir, &st, &state_bytes)?;
    let mut required = vec![MODEL_FILE, OPTIMIZER_FILE, METRICS_FILE];
    if st.tokenizer.file().is_some() {
        required.push(TOKENIZER_FILE);
    }
    for name in required {
        if !hashes.iter().any(|(n, _)| n == name) {
            return Err(corrupt(dir, format!("{name} is not among its files")));
        }
    }
    let mut model_bytes = None;
    for (name, want) in &hashes {
        let path = crate::io::safe_file::inside(dir, name).map_err(|e| corrupt(dir, e))?;
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
    let read_json = |file: &str| {
        let json = String::from_utf8(read(file)?)
            .map_err(|_| corrupt(dir, format!("{file} is not UTF-8")))?;
        HfTokenizer::from_json(&json).map(Box::new)
    };
    let tokenizer = match &st.tokenizer {
        TokenizerRecord::Char { vocab } => Tokenizer::Char(CharTokenizer::from_vocab(vocab)?),
        TokenizerRecord::Bpe { file } => Tokenizer::Bpe(read_json(file)?),
        TokenizerRecord::Hf { file } => Tokenizer::Hf {
            tokenizer: read_json(file)?,
            tiktoken: None,
        },
        TokenizerRecord::Tiktoken { name, file } => Tokenizer::Hf {
            tokenizer: read_json(file)?,
            tiktoken: Some(name.clone()),
        },
        TokenizerRecord::Ids { vocab_size } => Tokenizer::Ids(IdsTokenizer::new(*vocab_size)?),
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
            let model = crate::model::gpt::file::model_from_bytes(&bytes, &dir.join(MODEL_FILE))?;
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
        // A version-1 state hashes the other files but not itself, so an edited state could
        // pass as version 1: a folder that has a manifest (only version 2 writes one) never
        // holds a genuine version-1 state.
        if std::fs::symlink_metadata(dir.join(MANIFEST_FILE)).is_ok() {
            return Err(corrupt(
                dir,
                format!(
                    "{STATE_FILE} says version 1 but the folder has {MANIFEST_FILE}, which only \
                     version 2 writes"
                ),
            ));
        }
        let mut out = Vec::new();
        for (name, hash) in &st.files {
            file_set::check_name(dir, name).map_err(|e| corrupt(dir, e))?;
            out.push((name.clone(), hash.clone()));
        }
        return Ok(out);
    }
    let path = dir.join(MANIFEST_FILE);
    let text = crate::io::safe_file::read_text_in(dir, MANIFEST_FILE)
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
