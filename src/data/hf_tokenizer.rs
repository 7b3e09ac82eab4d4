//! A trained tokenizer as Hugging Face files: `tokenizer.json` (what `tokenizers` and
//! `AutoTokenizer` run) and `tokenizer_config.json`.
//!
//! Byte-level BPE is already a `tokenizers` document and is written as is. The character
//! tokenizer becomes a `WordLevel` model over its characters behind a `Split` pre-tokenizer
//! that isolates every character (pattern `[\s\S]`: any code point, newlines included, in
//! both the Rust `fancy-regex` and the Python Oniguruma engines) and a `Fuse` decoder (tokens
//! concatenated, no spaces). Token `i` is the `i`-th character, as here; a character outside
//! the vocabulary is an error there as here (the unknown token `<unk>` is not in the
//! vocabulary).

use serde_json::{Map, Value as Json, json};

use super::invalid;
use super::tokenizer::Tokenizer;
use crate::Result;

/// The `tokenizer.json` text of `tok`. The character form is checked by running it: the
/// vocabulary string must encode to ids `0..V` and decode back.
pub fn tokenizer_json(tok: &Tokenizer) -> Result<String> {
    let ct = match tok {
        Tokenizer::Bpe(bpe) | Tokenizer::Hf { tokenizer: bpe, .. } => return bpe.to_json(),
        Tokenizer::Char(ct) => ct,
        Tokenizer::Ids(_) => {
            return Err(invalid(
                "the model was trained on token ids without a tokenizer: there is no \
                 tokenizer.json to export",
            ));
        }
    };
    let chars = ct.vocab();
    let vocab: Map<String, Json> = chars
        .chars()
        .enumerate()
        .map(|(i, c)| (c.to_string(), json!(i)))
        .collect();
    let doc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[\\s\\S]"},
                          "behavior": "Isolated", "invert": false},
        "post_processor": null,
        "decoder": {"type": "Fuse"},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    });
    let text = doc.to_string();
    let hf = tokenizers::Tokenizer::from_bytes(text.as_bytes())
        .map_err(|e| invalid(format!("the character vocabulary as WordLevel: {e}")))?;
    let enc = hf
        .encode(chars.as_str(), false)
        .map_err(|e| invalid(format!("the character vocabulary as WordLevel: {e}")))?;
    let n = chars.chars().count() as u32;
    let back = hf.decode(enc.get_ids(), false).unwrap_or_default();
    if !enc.get_ids().iter().copied().eq(0..n) || back != chars {
        return Err(invalid(
            "the character vocabulary cannot be expressed as a WordLevel tokenizer.json \
             (it does not give the same ids)",
        ));
    }
    Ok(text)
}

/// `tokenizer_config.json`: the fast tokenizer class (it runs `tokenizer.json` as is) and
/// `model_max_length` (the model's context); these tokenizers have no special tokens.
pub fn tokenizer_config(model_max_length: usize) -> Json {
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": false,
    })
}
