//! Folders of pre-tokenized data written by `python -m orthoformer.prepare`: `train.bin` and
//! `val.bin` (token ids, little-endian `uint16` or `uint32` by vocabulary size, nanoGPT's
//! layout) and `meta.json` (format, dtype, vocabulary, tokenizer, token counts, SHA-256).
//! A checkpoint trained on such a folder records the folder as its data source; `eval` reads
//! its validation tokens from here.

use std::path::Path;

use super::invalid;
use crate::Result;

/// The description file of a token folder.
pub const META_FILE: &str = "meta.json";
/// `format` of [`META_FILE`].
pub const FORMAT: &str = "orthoformer-tokens";

/// What `meta.json` says about the token files (the fields this crate reads).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct TokenMeta {
    /// Always [`FORMAT`].
    pub format: String,
    /// `uint16` or `uint32`.
    pub dtype: String,
    /// Vocabulary size (every id is below it).
    pub vocab_size: usize,
    /// Tokens in `train.bin`.
    pub train_tokens: usize,
    /// Tokens in `val.bin`.
    pub val_tokens: usize,
}

/// Whether `path` is a folder holding a [`META_FILE`].
pub fn is_token_folder(path: &Path) -> bool {
    path.is_dir() && path.join(META_FILE).is_file()
}

/// Reads and checks `dir/meta.json`.
pub fn read_meta(dir: &Path) -> Result<TokenMeta> {
    let path = dir.join(META_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| crate::Error::io(&path, e))?;
    let meta: TokenMeta = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "{} does not parse ({e}); write it with python -m orthoformer.prepare",
            path.display()
        ))
    })?;
    if meta.format != FORMAT || !matches!(meta.dtype.as_str(), "uint16" | "uint32") {
        return Err(invalid(format!(
            "{} is not an {FORMAT} description with dtype uint16 or uint32",
            path.display()
        )));
    }
    Ok(meta)
}

/// The tokens of `split` (`train` or `val`) of the folder `dir`, checked against its
/// `meta.json` (file size, ids below the vocabulary).
pub fn read_split(dir: &Path, split: &str) -> Result<Vec<u32>> {
    let meta = read_meta(dir)?;
    let (file, count) = match split {
        "train" => ("train.bin", meta.train_tokens),
        "val" => ("val.bin", meta.val_tokens),
        other => return Err(invalid(format!("split {other:?}: use train or val"))),
    };
    let path = dir.join(file);
    let bytes = std::fs::read(&path).map_err(|e| crate::Error::io(&path, e))?;
    let width = if meta.dtype == "uint16" { 2 } else { 4 };
    if bytes.len() != count.saturating_mul(width) {
        return Err(invalid(format!(
            "{} holds {} bytes but {META_FILE} says {count} {} tokens: prepare the folder again",
            path.display(),
            bytes.len(),
            meta.dtype
        )));
    }
    let ids: Vec<u32> = if width == 2 {
        bytes
            .chunks_exact(2)
            .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
            .collect()
    } else {
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= meta.vocab_size) {
        return Err(invalid(format!(
            "{} holds token id {bad}, outside the vocabulary of {}",
            path.display(),
            meta.vocab_size
        )));
    }
    Ok(ids)
}
