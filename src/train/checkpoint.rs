//! The training checkpoint folder:
//!
//! | file | holds |
//! |---|---|
//! | `model.safetensors` | the model (written by the model's own `save_model`) |
//! | `optimizer.safetensors` | AdamW moments `m`, `v` (f32, one per trainable parameter) |
//! | `tokenizer.json` | the BPE tokenizer (Hugging Face format; BPE runs only) |
//! | `metrics.jsonl` | the evaluation records so far |
//! | `state.json` | step, sampler RNG position, options, model config, tokenizer, data, and the SHA-256 of every other file |
//!
//! Every file is written atomically and `state.json` last: it names the hashes of the files
//! it belongs to, so a folder caught between two checkpoints, a truncated file or a corrupt
//! one is detected on load instead of resuming from mixed state.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use sha2::{Digest, Sha256};

use super::adamw::AdamW;
use super::metrics::{MetricRecord, read_jsonl, write_jsonl};
use super::options::TrainOptions;
use super::trainer::RunState;
use crate::data::Tokenizer;
use crate::data::bpe::BpeTokenizer;
use crate::data::char_level::CharTokenizer;
use crate::{Error, Result};

/// The model weights file.
pub const MODEL_FILE: &str = "model.safetensors";
/// The optimizer moments file.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// The BPE tokenizer file.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The metrics log.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The state file, written last.
pub const STATE_FILE: &str = "state.json";
const FORMAT: &str = "orthoformer-train-checkpoint";
const VERSION: u32 = 1;

/// The tokenizer as recorded in `state.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TokenizerRecord {
    /// Character level: token `i` is the `i`-th character of `vocab`.
    Char {
        /// The vocabulary in id order.
        vocab: String,
    },
    /// Byte-level BPE stored in [`TOKENIZER_FILE`].
    Bpe {
        /// Its file name in the folder.
        file: String,
    },
}

/// Where the training text came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DataRecord {
    /// The file path, or the embedded corpus' name.
    pub source: String,
    /// Its size in bytes.
    pub bytes: usize,
    /// SHA-256 of the text (hex).
    pub sha256: String,
}

/// The contents of `state.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// Always `orthoformer-train-checkpoint`.
    pub format: String,
    /// Format version.
    pub version: u32,
    /// Optimizer steps done.
    pub step: usize,
    /// Batch sampler RNG position (a u128 as a decimal string; JSON numbers cannot hold it).
    pub sampler_word_pos: String,
    /// AdamW step count `t`.
    pub adam_t: u64,
    /// Sum of training losses since the last record.
    pub window_loss: f64,
    /// Steps since the last record.
    pub window_steps: usize,
    /// The training options.
    pub options: TrainOptions,
    /// The model configuration (the model's own serde form).
    pub model: serde_json::Value,
    /// Seed of the model's initialisation.
    pub model_seed: u64,
    /// Sequence length trained on.
    pub seq_len: usize,
    /// The tokenizer.
    pub tokenizer: TokenizerRecord,
    /// The training text.
    pub data: DataRecord,
    /// SHA-256 (hex) of each other file of the checkpoint.
    pub files: BTreeMap<String, String>,
}

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

/// SHA-256 of `bytes` in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn hash_file(path: &Path) -> Result<String> {
    Ok(sha256_hex(
        &std::fs::read(path).map_err(|e| Error::io(path, e))?,
    ))
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

/// Writes a checkpoint into `dir` (which must exist). `save_model` writes the model file to
/// the path it is given.
pub fn save(
    dir: &Path,
    parts: &CheckpointParts<'_>,
    save_model: &mut dyn FnMut(&Path) -> Result<()>,
) -> Result<()> {
    let mut files = BTreeMap::new();
    let model_path = dir.join(MODEL_FILE);
    save_model(&model_path)?;
    files.insert(MODEL_FILE.to_string(), hash_file(&model_path)?);

    let optim = optimizer_bytes(&parts.run.adam)?;
    crate::io::write_atomic_bytes(&dir.join(OPTIMIZER_FILE), &optim)?;
    files.insert(OPTIMIZER_FILE.to_string(), sha256_hex(&optim));

    let tokenizer = match parts.tokenizer {
        Tokenizer::Char(t) => TokenizerRecord::Char { vocab: t.vocab() },
        Tokenizer::Bpe(t) => {
            let json = t.to_json()?;
            crate::io::write_atomic_bytes(&dir.join(TOKENIZER_FILE), json.as_bytes())?;
            files.insert(TOKENIZER_FILE.to_string(), sha256_hex(json.as_bytes()));
            TokenizerRecord::Bpe {
                file: TOKENIZER_FILE.to_string(),
            }
        }
    };
    let metrics_path = dir.join(METRICS_FILE);
    write_jsonl(&metrics_path, &parts.run.metrics)?;
    files.insert(METRICS_FILE.to_string(), hash_file(&metrics_path)?);

    let state = StateFile {
        format: FORMAT.to_string(),
        version: VERSION,
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
        files,
    };
    let json = serde_json::to_vec_pretty(&state)
        .map_err(|e| super::invalid(format!("serialising state.json: {e}")))?;
    crate::io::write_atomic_bytes(&dir.join(STATE_FILE), &json)
}

/// Whether `dir` holds a checkpoint (its `state.json`).
pub fn exists(dir: &Path) -> bool {
    dir.join(STATE_FILE).is_file()
}

/// Reads and verifies everything but the model weights; the model file's hash is checked,
/// so the caller may load it next.
pub fn load(dir: &Path) -> Result<Loaded> {
    if !dir.is_dir() {
        return Err(super::invalid(format!(
            "checkpoint {} is not a folder: pass the --out folder of `orthoformer train`",
            dir.display()
        )));
    }
    let state_path = dir.join(STATE_FILE);
    let text = std::fs::read(&state_path)
        .map_err(|e| corrupt(dir, format!("{STATE_FILE} cannot be read ({e})")))?;
    let st: StateFile = serde_json::from_slice(&text)
        .map_err(|e| corrupt(dir, format!("{STATE_FILE} does not parse ({e})")))?;
    if st.format != FORMAT || st.version != VERSION {
        return Err(corrupt(
            dir,
            format!("{STATE_FILE} is not a version-{VERSION} {FORMAT}"),
        ));
    }
    for name in [MODEL_FILE, OPTIMIZER_FILE, METRICS_FILE] {
        if !st.files.contains_key(name) {
            return Err(corrupt(dir, format!("{STATE_FILE} does not list {name}")));
        }
    }
    for (name, want) in &st.files {
        let path = dir.join(name);
        let got = hash_file(&path).map_err(|_| corrupt(dir, format!("{name} is missing")))?;
        if &got != want {
            return Err(corrupt(
                dir,
                format!("{name} is truncated or modified (SHA-256 differs)"),
            ));
        }
    }
    let optim = std::fs::read(dir.join(OPTIMIZER_FILE)).map_err(|e| Error::io(dir, e))?;
    let mut adam = AdamW::new(st.options.adamw, 0);
    (adam.m, adam.v) = optimizer_from_bytes(&optim).map_err(|why| corrupt(dir, why))?;
    adam.t = st.adam_t;
    let tokenizer = match &st.tokenizer {
        TokenizerRecord::Char { vocab } => Tokenizer::Char(CharTokenizer::from_vocab(vocab)?),
        TokenizerRecord::Bpe { file } => {
            let json = std::fs::read_to_string(dir.join(file))
                .map_err(|e| corrupt(dir, format!("{file}: {e}")))?;
            Tokenizer::Bpe(Box::new(BpeTokenizer::from_json(&json)?))
        }
    };
    let metrics: Vec<MetricRecord> = read_jsonl(&dir.join(METRICS_FILE))?;
    let sampler_pos = st
        .sampler_word_pos
        .parse::<u128>()
        .map_err(|_| corrupt(dir, "sampler_word_pos is not a number"))?;
    let run = RunState {
        step: st.step,
        sampler_pos,
        adam,
        metrics,
        last_checkpoint: Some(st.step),
        window_loss: st.window_loss,
        window_steps: st.window_steps,
    };
    Ok(Loaded {
        state_file: st,
        run,
        tokenizer,
    })
}

fn optimizer_bytes(adam: &AdamW) -> Result<Vec<u8>> {
    let m: &[u8] = bytemuck::cast_slice(&adam.m);
    let v: &[u8] = bytemuck::cast_slice(&adam.v);
    let n = adam.m.len();
    let view = |d| TensorView::new(Dtype::F32, vec![n], d);
    let tensors = [
        ("m", view(m).map_err(|e| super::invalid(e.to_string()))?),
        ("v", view(v).map_err(|e| super::invalid(e.to_string()))?),
    ];
    safetensors::tensor::serialize(tensors, None)
        .map_err(|e| super::invalid(format!("serialising the optimizer state: {e}")))
}

fn optimizer_from_bytes(bytes: &[u8]) -> std::result::Result<(Vec<f32>, Vec<f32>), String> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| format!("{OPTIMIZER_FILE}: {e}"))?;
    let read = |name: &str| -> std::result::Result<Vec<f32>, String> {
        let t = st
            .tensor(name)
            .map_err(|e| format!("{OPTIMIZER_FILE}: {e}"))?;
        if t.dtype() != Dtype::F32 {
            return Err(format!("{OPTIMIZER_FILE}: {name} is not f32"));
        }
        Ok(t.data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    let (m, v) = (read("m")?, read("v")?);
    if m.len() != v.len() {
        return Err(format!("{OPTIMIZER_FILE}: m and v differ in length"));
    }
    Ok((m, v))
}
