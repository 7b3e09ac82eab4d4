//! `state.json`, the record of a training checkpoint that is not a tensor: step, sampler
//! position, options, model configuration, tokenizer, data provenance. It is covered by the
//! folder's `SHA256SUMS`, and on load every value is checked as the command line checks the
//! same value, so an edited or damaged file is a one-line error, never a panic later.

use std::collections::BTreeMap;

use super::super::options::TrainOptions;
use super::TOKENIZER_FILE;
use crate::io::file_set::is_sha256_hex;
use crate::model::GptConfig;

/// `format` of every state file.
pub const FORMAT: &str = "orthoformer-train-checkpoint";
/// The version written: 2 has `SHA256SUMS` beside it (covering state.json too) and no `files`.
pub const VERSION: u32 = 2;
/// Version 1 listed the other files' hashes in `files`; it still loads.
pub const VERSION_1: u32 = 1;

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
        /// Its file name in the folder (always [`TOKENIZER_FILE`]).
        file: String,
    },
    /// A Hugging Face tokenizer brought with the data, stored in [`TOKENIZER_FILE`].
    Hf {
        /// Its file name in the folder (always [`TOKENIZER_FILE`]).
        file: String,
    },
    /// A tiktoken encoding (`name`, e.g. `gpt2`), stored converted to a Hugging Face
    /// tokenizer in [`TOKENIZER_FILE`] (the same ids; checked when the data was prepared).
    Tiktoken {
        /// The encoding's name.
        name: String,
        /// Its file name in the folder (always [`TOKENIZER_FILE`]).
        file: String,
    },
    /// Token ids without a tokenizer.
    Ids {
        /// Vocabulary size.
        vocab_size: usize,
    },
}

impl TokenizerRecord {
    /// The tokenizer file this record keeps in the folder, if any.
    pub fn file(&self) -> Option<&str> {
        match self {
            TokenizerRecord::Bpe { file }
            | TokenizerRecord::Hf { file }
            | TokenizerRecord::Tiktoken { file, .. } => Some(file),
            TokenizerRecord::Char { .. } | TokenizerRecord::Ids { .. } => None,
        }
    }
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
    /// Format version (2; version 1 had no `SHA256SUMS`).
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
    /// Version 1 only: SHA-256 (hex) of each other file (version 2 keeps them in `SHA256SUMS`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
}

impl StateFile {
    /// Checks every value as the command line checks it, and returns the model configuration
    /// and the sampler position. The error says which value is wrong.
    pub fn validate(&self) -> Result<(GptConfig, u128), String> {
        if self.format != FORMAT || !(self.version == VERSION || self.version == VERSION_1) {
            return Err(format!("it is not a version-{VERSION} {FORMAT}"));
        }
        self.options
            .validate()
            .map_err(|e| format!("its options are invalid ({e})"))?;
        let cfg: GptConfig = serde_json::from_value(self.model.clone())
            .map_err(|e| format!("its model configuration does not parse ({e})"))?;
        cfg.validate()
            .map_err(|e| format!("its model configuration is invalid ({e})"))?;
        if self.seq_len == 0 || self.seq_len > cfg.context {
            return Err(format!(
                "seq_len {} is not between 1 and the context {}",
                self.seq_len, cfg.context
            ));
        }
        if self.step > self.options.steps {
            return Err(format!(
                "step {} is past the run's {} steps",
                self.step, self.options.steps
            ));
        }
        if self.adam_t != self.step as u64 {
            return Err(format!(
                "the optimizer's step count {} is not the step {}",
                self.adam_t, self.step
            ));
        }
        if self.window_steps > self.step || !self.window_loss.is_finite() {
            return Err(format!(
                "the loss window ({} steps, sum {}) is impossible at step {}",
                self.window_steps, self.window_loss, self.step
            ));
        }
        let sampler = self
            .sampler_word_pos
            .parse::<u128>()
            .map_err(|_| "sampler_word_pos is not a number".to_string())?;
        if !is_sha256_hex(&self.data.sha256) {
            return Err("the training text's SHA-256 is not 64 hex digits".to_string());
        }
        match &self.tokenizer {
            TokenizerRecord::Char { vocab } if vocab.is_empty() => {
                return Err("the character vocabulary is empty".to_string());
            }
            TokenizerRecord::Ids { vocab_size } if *vocab_size != cfg.vocab_size => {
                return Err(format!(
                    "the ids-only vocabulary {vocab_size} is not the model's {}",
                    cfg.vocab_size
                ));
            }
            TokenizerRecord::Tiktoken { name, .. } if name.is_empty() => {
                return Err("the tiktoken encoding has no name".to_string());
            }
            r => {
                if let Some(file) = r.file()
                    && file != TOKENIZER_FILE
                {
                    return Err(format!(
                        "the tokenizer file must be {TOKENIZER_FILE}, not {file:?}"
                    ));
                }
            }
        }
        if self.version == VERSION && !self.files.is_empty() {
            return Err("a version-2 state lists no files (SHA256SUMS does)".to_string());
        }
        Ok((cfg, sampler))
    }
}
