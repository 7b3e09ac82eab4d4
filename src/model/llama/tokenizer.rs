//! The tokenizer of a pretrained model: a GPT-2-style byte-level BPE built from GGUF metadata
//! (`tokenizer.ggml.tokens` / `merges`), a SentencePiece vocabulary (`tokenizer_spm`), or read
//! from a Hugging Face `tokenizer.json`; either way the crate's one tokenizer type
//! ([`Tokenizer`], its Hugging Face form), which encodes and decodes for every model family.
//!
//! The GGUF path assembles a `tokenizer.json` document and hands it to the `tokenizers` crate,
//! so both paths share one implementation. Pre-tokenisation follows llama.cpp's flavours:
//! `smollm` (and other StarCoder-style vocabularies) split digits individually before the
//! GPT-2 byte-level regex.

use serde_json::json;

use crate::data::Tokenizer;
use crate::data::hf::HfTokenizer;
use crate::io::gguf::{GgufFile, keys};
use crate::model::ModelError;

fn err(m: String) -> crate::Error {
    ModelError::Config(m).into()
}

/// Builds the tokenizer stored in a GGUF file.
pub fn tokenizer_from_gguf(g: &GgufFile) -> crate::Result<Tokenizer> {
    let model = g.get_str(keys::TOKENIZER_MODEL)?;
    if model != "gpt2" && model != "llama" {
        return Err(err(format!(
            "{}: tokenizer model {model:?} is not supported (gpt2-style byte-level BPE or llama \
             SentencePiece only)",
            g.path.display()
        )));
    }
    let list = |key: &str| -> crate::Result<Vec<String>> {
        let a = g.get(key).and_then(|v| v.as_array()).ok_or_else(|| {
            err(format!(
                "{}: metadata {key} is missing or not an array",
                g.path.display()
            ))
        })?;
        a.iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| err(format!("{key}: non-string entry")))
            })
            .collect()
    };
    let tokens = list(keys::TOKENIZER_TOKENS)?;
    let types: Vec<u64> = g
        .get(keys::TOKENIZER_TOKEN_TYPE)
        .and_then(|v| v.as_array())
        .map(|a| a.iter().map(|v| v.as_u64().unwrap_or(1)).collect())
        .unwrap_or_default();
    if model == "llama" {
        let scores: Vec<f32> = g
            .get("tokenizer.ggml.scores")
            .and_then(|v| v.as_array())
            .map(|a| a.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect())
            .unwrap_or_default();
        let unk = g
            .get(keys::TOKENIZER_UNK)
            .and_then(|v| v.as_u64())
            .and_then(|i| tokens.get(i as usize))
            .map(String::as_str);
        let add_prefix = super::tokenizer_spm::add_space_prefix(g);
        let doc = super::tokenizer_spm::spm_document(&tokens, &scores, &types, add_prefix, unk)?;
        return tokenizer_from_json(&doc.to_string(), &g.path.display().to_string());
    }
    let merges = list(keys::TOKENIZER_MERGES)?;
    // llama.cpp's names of the two splittings implemented here; any other would split text
    // differently from llama.cpp, so it is refused rather than run as GPT-2's.
    let digits = match g.get(keys::TOKENIZER_PRE).map(|v| v.as_str()) {
        None | Some(Some("gpt-2" | "phi-2")) => false,
        Some(Some("smollm" | "starcoder" | "refact")) => true,
        Some(other) => {
            return Err(err(format!(
                "{}: {} {} is not implemented (gpt-2, phi-2, smollm, starcoder and refact are): \
                 its text would be split differently from llama.cpp",
                g.path.display(),
                keys::TOKENIZER_PRE,
                other.map_or("(not a string)".into(), |s| format!("{s:?}"))
            )));
        }
    };
    let vocab: serde_json::Map<String, serde_json::Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let merges: Vec<serde_json::Value> = merges
        .iter()
        .map(|m| match m.split_once(' ') {
            Some((a, b)) => Ok(json!([a, b])),
            None => Err(err(format!("BPE merge {m:?} has no space"))),
        })
        .collect::<crate::Result<_>>()?;
    // Control tokens (type 3) and user-defined ones (type 4) are matched whole, never split.
    let added: Vec<serde_json::Value> = types
        .iter()
        .enumerate()
        .filter(|(_, t)| **t == 3 || **t == 4)
        .filter_map(|(i, t)| tokens.get(i).map(|s| (i, s, *t == 3)))
        // An empty token would match everywhere (and is refused as an added token).
        .filter(|(_, s, _)| !s.is_empty())
        .map(|(i, s, special)| {
            json!({"id": i, "content": s, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": special})
        })
        .collect();
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    let pre_tokenizer = if digits {
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, byte_level]})
    } else {
        byte_level.clone()
    };
    let doc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab, "merges": merges}
    });
    tokenizer_from_json(&doc.to_string(), &g.path.display().to_string())
}

/// Reads a `tokenizer.json` document (`what` names it in messages).
pub fn tokenizer_from_json(text: &str, what: &str) -> crate::Result<Tokenizer> {
    HfTokenizer::parse(text)
        .map(Tokenizer::pretrained)
        .map_err(|why| err(format!("{what}: cannot build the tokenizer: {why}")))
}
