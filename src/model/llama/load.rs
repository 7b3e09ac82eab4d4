//! One entry point for pretrained models: a `.gguf` file, or a folder holding
//! `model.safetensors` (or shards listed in `model.safetensors.index.json`), `config.json` and
//! `tokenizer.json` (Hugging Face layout).
//!
//! [`load_model`] gives owned f32 weights (what rotation, quantisation and alignment edit);
//! [`load_engine`] gives a model ready to run, whose GGUF weights stay in the file's mapping in
//! their stored types, so its resident memory is about the file size.

use std::path::Path;

use super::config::LlamaConfig;
use super::forward::Llama;
use super::special_tokens::SpecialTokens;
use super::tokenizer::{tokenizer_from_gguf, tokenizer_from_json};
use super::weights::LlamaWeights;
use crate::data::Tokenizer;
use crate::io::gguf::{GgufFile, Value};
use crate::io::safetensors_shards;
use crate::model::ModelError;

/// A loaded model: weights, tokenizer, and the GGUF metadata it came with (if any), which a
/// GGUF writer copies so the output keeps its tokenizer.
pub struct LoadedModel {
    /// The weights (f32, HF orientation).
    pub weights: LlamaWeights,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// Metadata of the source GGUF, when it was one.
    pub gguf_metadata: Option<Vec<(String, Value)>>,
    /// Special tokens and chat template of the source.
    pub special: SpecialTokens,
}

/// A model ready for inference, with its tokenizer.
pub struct LoadedEngine {
    /// The model (GGUF weights mapped, in their stored types).
    pub model: Llama,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// Special tokens of the source (its end-of-sequence id stops generation).
    pub special: SpecialTokens,
}

/// Loads a model from a GGUF file or a Hugging Face folder, as owned f32 weights.
pub fn load_model(path: &Path) -> crate::Result<LoadedModel> {
    if path.is_dir() {
        let (weights, tokenizer) = load_hf_folder(path)?;
        let special = SpecialTokens::from_hf_folder(path, &tokenizer);
        return Ok(LoadedModel {
            weights,
            tokenizer,
            gguf_metadata: None,
            special,
        });
    }
    let g = GgufFile::open(path)?;
    let weights = LlamaWeights::from_gguf(&g)?;
    let tokenizer = tokenizer_from_gguf(&g)?;
    Ok(LoadedModel {
        weights,
        tokenizer,
        special: SpecialTokens::from_gguf(&g.metadata),
        gguf_metadata: Some(g.metadata),
    })
}

/// Loads a model for inference from a GGUF file (weights left in the file's mapping) or a
/// Hugging Face folder (f32).
pub fn load_engine(path: &Path) -> crate::Result<LoadedEngine> {
    if path.is_dir() {
        let (weights, tokenizer) = load_hf_folder(path)?;
        let special = SpecialTokens::from_hf_folder(path, &tokenizer);
        return Ok(LoadedEngine {
            model: Llama::new(weights),
            tokenizer,
            special,
        });
    }
    let g = GgufFile::open(path)?;
    Ok(LoadedEngine {
        model: Llama::from_gguf(&g)?,
        tokenizer: tokenizer_from_gguf(&g)?,
        special: SpecialTokens::from_gguf(&g.metadata),
    })
}

/// The weights of a folder: `model.safetensors` when present (as `transformers` prefers it),
/// else the shards `model.safetensors.index.json` names.
fn load_safetensors(dir: &Path, cfg: LlamaConfig, tied: bool) -> crate::Result<LlamaWeights> {
    let single = dir.join("model.safetensors");
    let index = dir.join(safetensors_shards::INDEX);
    if std::fs::symlink_metadata(&single).is_err() && std::fs::symlink_metadata(&index).is_ok() {
        let shards = safetensors_shards::read(dir)?;
        let files: Vec<(String, &[u8])> = shards
            .files
            .iter()
            .map(|(p, b)| (p.clone(), b.as_slice()))
            .collect();
        return LlamaWeights::from_safetensors_files(cfg, tied, &files, &shards.index_path);
    }
    let bytes = crate::io::safe_file::read_in(dir, "model.safetensors")?;
    LlamaWeights::from_safetensors(cfg, tied, &bytes, &single.display().to_string())
}

/// `model.safetensors` (or its shards), `config.json` and `tokenizer.json` of a folder.
fn load_hf_folder(path: &Path) -> crate::Result<(LlamaWeights, Tokenizer)> {
    let read = |name: &str| -> crate::Result<Vec<u8>> { crate::io::safe_file::read_in(path, name) };
    let cfg_text = String::from_utf8(read("config.json")?)
        .map_err(|_| ModelError::Config(format!("{}/config.json is not UTF-8", path.display())))?;
    let (cfg, tied) = LlamaConfig::from_hf_json(&cfg_text)
        .map_err(|e| ModelError::Config(format!("{}: {e}", path.display())))?;
    let weights = load_safetensors(path, cfg, tied)?;
    let tok_text = String::from_utf8(read("tokenizer.json")?).map_err(|_| {
        ModelError::Config(format!("{}/tokenizer.json is not UTF-8", path.display()))
    })?;
    let tokenizer = tokenizer_from_json(
        &tok_text,
        &path.join("tokenizer.json").display().to_string(),
    )?;
    Ok((weights, tokenizer))
}
