//! The GGUF tokenizer metadata of a Hugging Face folder, as llama.cpp's `convert_hf_to_gguf.py`
//! writes it for a byte-level BPE (`tokenizer.ggml.model = gpt2`): the tokens in id order
//! (ids the tokenizer lacks become `[PAD{i}]`, unused, up to the model's vocabulary), their
//! types (normal; added tokens control when special or special-looking, else user-defined),
//! the merges, the pre-tokenizer's llama.cpp name, the special-token ids, `add_bos_token` and
//! the chat template. What llama.cpp could not run the same way (a normaliser, a
//! SentencePiece-style vocabulary, a pre-tokenizer it has no name for) is refused by name,
//! never written approximately: the written file must tokenize as the folder does.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value as Json;

use super::SpecialTokens;
use super::load::LoadedModel;
use crate::io::gguf::{Value, keys};
use crate::model::ModelError;

/// llama.cpp's token types (`llama_token_type`).
const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

fn err(what: &str, m: String) -> crate::Error {
    ModelError::Config(format!("{what}: {m}; GGUF output needs a byte-level BPE tokenizer llama.cpp runs the same way (write a Hugging Face folder instead)")).into()
}

/// The metadata a GGUF written from `loaded` (read from `path`) starts from: a GGUF
/// source's own, or a Hugging Face folder's tokenizer ([`folder_metadata`]).
pub fn source_metadata(path: &Path, loaded: &LoadedModel) -> crate::Result<Vec<(String, Value)>> {
    match &loaded.gguf_metadata {
        Some(m) => Ok(m.clone()),
        None => folder_metadata(path, loaded.weights.cfg.vocab_size, &loaded.special),
    }
}

/// The GGUF tokenizer metadata of the Hugging Face folder `dir` (its `tokenizer.json`) for a
/// model of `vocab_size` embedding rows, with `special`'s ids and template.
pub fn folder_metadata(
    dir: &Path,
    vocab_size: usize,
    special: &SpecialTokens,
) -> crate::Result<Vec<(String, Value)>> {
    let text = crate::io::safe_file::read_text_in(dir, "tokenizer.json")?;
    let what = dir.join("tokenizer.json").display().to_string();
    tokenizer_metadata(&text, vocab_size, special, &what)
}

/// [`folder_metadata`] of a `tokenizer.json` document (`what` names it in messages).
pub fn tokenizer_metadata(
    text: &str,
    vocab_size: usize,
    special: &SpecialTokens,
    what: &str,
) -> crate::Result<Vec<(String, Value)>> {
    let doc: Json = serde_json::from_str(text).map_err(|e| err(what, format!("not JSON ({e})")))?;
    let model = &doc["model"];
    let kind = model["type"].as_str().unwrap_or("(none)");
    if kind != "BPE" {
        return Err(err(what, format!("model.type {kind:?} is not BPE")));
    }
    if model["byte_fallback"].as_bool() == Some(true) {
        return Err(err(
            what,
            "model.byte_fallback true is a SentencePiece-style vocabulary".into(),
        ));
    }
    if !doc["normalizer"].is_null() {
        let t = doc["normalizer"]["type"].as_str().unwrap_or("?");
        return Err(err(
            what,
            format!("normalizer {t:?}: llama.cpp's gpt2 tokenizer normalises nothing"),
        ));
    }
    let pre = pre_name(&doc["pre_tokenizer"]).map_err(|m| err(what, m))?;
    let (tokens, types) = tokens(&doc, vocab_size).map_err(|m| err(what, m))?;
    let merges = merges(&model["merges"]).map_err(|m| err(what, m))?;
    let str_type = Value::Str(String::new()).type_id();
    let strings = |v: Vec<String>| Value::Array(str_type, v.into_iter().map(Value::Str).collect());
    let mut meta = vec![
        (keys::TOKENIZER_MODEL.into(), Value::Str("gpt2".into())),
        (keys::TOKENIZER_PRE.into(), Value::Str(pre.into())),
        (keys::TOKENIZER_TOKENS.into(), strings(tokens)),
        (
            keys::TOKENIZER_TOKEN_TYPE.into(),
            Value::Array(
                Value::I32(0).type_id(),
                types.into_iter().map(Value::I32).collect(),
            ),
        ),
        (keys::TOKENIZER_MERGES.into(), strings(merges)),
    ];
    for (k, id) in [
        (keys::TOKENIZER_BOS, special.bos),
        (keys::TOKENIZER_EOS, special.eos),
        (keys::TOKENIZER_UNK, special.unk),
        (keys::TOKENIZER_PAD, special.pad),
    ] {
        if let Some(id) = id {
            if id as usize >= vocab_size {
                return Err(err(
                    what,
                    format!("{k} {id} is outside the vocabulary of {vocab_size}"),
                ));
            }
            meta.push((k.into(), Value::U32(id)));
        }
    }
    if let Some(b) = special.add_bos {
        meta.push((keys::TOKENIZER_ADD_BOS.into(), Value::Bool(b)));
    }
    if let Some(t) = &special.chat_template {
        meta.push((keys::CHAT_TEMPLATE.into(), Value::Str(t.clone())));
    }
    Ok(meta)
}

/// llama.cpp's name (`tokenizer.ggml.pre`) of a `pre_tokenizer`, for the ones whose
/// splitting this crate and llama.cpp both implement.
fn pre_name(p: &Json) -> Result<&'static str, String> {
    let byte_level = |b: &Json| {
        b["type"] == "ByteLevel"
            && b["use_regex"].as_bool().unwrap_or(true)
            && !b["add_prefix_space"].as_bool().unwrap_or(false)
    };
    if byte_level(p) {
        return Ok("gpt-2");
    }
    if p["type"] == "Sequence"
        && let Some([d, b]) = p["pretokenizers"].as_array().map(Vec::as_slice)
        && d["type"] == "Digits"
        && d["individual_digits"] == true
        && byte_level(b)
    {
        return Ok("smollm");
    }
    let shown: String = p.to_string().chars().take(160).collect();
    Err(format!(
        "pre_tokenizer {shown} is not one of llama.cpp's gpt-2 (ByteLevel with its regex, no \
         prefix space) or smollm (individual Digits, then that ByteLevel)"
    ))
}

/// Whether an added token that is not marked special looks like a control token to
/// llama.cpp's converter (`does_token_look_special`).
fn looks_special(t: &str) -> bool {
    matches!(t, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (t.starts_with("<|") && t.ends_with("|>"))
        || (t.starts_with("<｜") && t.ends_with("｜>"))
        || (t.starts_with("<unused") && t.ends_with('>'))
}

/// The tokens in id order and their types, over `vocab_size` ids.
fn tokens(doc: &Json, vocab_size: usize) -> Result<(Vec<String>, Vec<i32>), String> {
    let vocab = doc["model"]["vocab"]
        .as_object()
        .ok_or("model.vocab is not an object of token -> id")?;
    let mut by_id: HashMap<usize, (String, i32)> = HashMap::with_capacity(vocab.len());
    let mut put = |id: &Json, token: &str, ty: i32, added: bool| -> Result<(), String> {
        let id = id
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < vocab_size)
            .ok_or_else(|| {
                format!(
                    "token {token:?} has id {id}, not below the model's vocab_size {vocab_size}"
                )
            })?;
        match by_id.insert(id, (token.to_string(), ty)) {
            Some((other, _)) if !added => {
                Err(format!("tokens {other:?} and {token:?} share id {id}"))
            }
            _ => Ok(()),
        }
    };
    for (token, id) in vocab {
        put(id, token, NORMAL, false)?;
    }
    // Added tokens are matched whole, as raw text (llama.cpp takes them pre-normalised).
    for a in doc["added_tokens"].as_array().into_iter().flatten() {
        let content = a["content"]
            .as_str()
            .ok_or("an added token without content")?;
        let ty = if a["special"] == true || looks_special(content) {
            CONTROL
        } else {
            USER_DEFINED
        };
        let content = if ty == USER_DEFINED {
            content.replace('\u{2581}', " ")
        } else {
            content.to_string()
        };
        put(&a["id"], &content, ty, true)?;
    }
    Ok((0..vocab_size)
        .map(|i| by_id.remove(&i).unwrap_or((format!("[PAD{i}]"), UNUSED)))
        .unzip())
}

/// The merges as GGUF stores them: `"a b"`, from either of `tokenizer.json`'s forms.
fn merges(m: &Json) -> Result<Vec<String>, String> {
    let list = m.as_array().ok_or("model.merges is not a list")?;
    list.iter()
        .map(|x| match x {
            Json::String(s) if s.split(' ').count() == 2 => Ok(s.clone()),
            Json::Array(p) => match p.as_slice() {
                [Json::String(a), Json::String(b)] if !a.contains(' ') && !b.contains(' ') => {
                    Ok(format!("{a} {b}"))
                }
                _ => Err(format!("merge {x} is not two tokens without spaces")),
            },
            _ => Err(format!("merge {x} is not two tokens")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(pre: Json) -> Json {
        json!({
            "added_tokens": [
                {"id": 0, "content": "<|endoftext|>", "special": true},
                {"id": 4, "content": "<|tool|>", "special": false},
                {"id": 5, "content": "hey\u{2581}you", "special": false}],
            "normalizer": null,
            "pre_tokenizer": pre,
            "model": {"type": "BPE", "vocab": {"<|endoftext|>": 0, "a": 1, "b": 2, "ab": 3},
                      "merges": [["a", "b"]]}
        })
    }

    fn smollm() -> Json {
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]})
    }

    fn get<'a>(m: &'a [(String, Value)], k: &str) -> &'a Value {
        &m.iter().find(|(x, _)| x == k).unwrap().1
    }

    #[test]
    fn a_byte_level_bpe_becomes_llama_cpp_metadata() {
        let special = SpecialTokens {
            eos: Some(0),
            add_bos: Some(false),
            chat_template: Some("{{ x }}".into()),
            ..Default::default()
        };
        let m = tokenizer_metadata(&doc(smollm()).to_string(), 8, &special, "t").unwrap();
        assert_eq!(get(&m, keys::TOKENIZER_PRE).as_str(), Some("smollm"));
        let toks: Vec<&str> = get(&m, keys::TOKENIZER_TOKENS)
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            toks,
            [
                "<|endoftext|>",
                "a",
                "b",
                "ab",
                "<|tool|>",
                "hey you",
                "[PAD6]",
                "[PAD7]"
            ]
        );
        let types: Vec<u64> = get(&m, keys::TOKENIZER_TOKEN_TYPE)
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(types, [3, 1, 1, 1, 3, 4, 5, 5]);
        let merges = get(&m, keys::TOKENIZER_MERGES).as_array().unwrap();
        assert_eq!(merges[0].as_str(), Some("a b"));
        assert_eq!(get(&m, keys::TOKENIZER_EOS).as_u64(), Some(0));
        assert_eq!(get(&m, keys::CHAT_TEMPLATE).as_str(), Some("{{ x }}"));
        let plain = json!({"type": "ByteLevel", "add_prefix_space": false});
        let m = tokenizer_metadata(&doc(plain).to_string(), 6, &special, "t").unwrap();
        assert_eq!(get(&m, keys::TOKENIZER_PRE).as_str(), Some("gpt-2"));
    }

    #[test]
    fn what_llama_cpp_would_run_differently_is_refused_by_name() {
        let sp = SpecialTokens::default();
        let refuse = |d: Json, n: usize, needle: &str| {
            let e = tokenizer_metadata(&d.to_string(), n, &sp, "t")
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{needle:?} not in {e}");
        };
        let meta = json!({"type": "Metaspace", "replacement": "\u{2581}"});
        refuse(doc(meta), 8, "pre_tokenizer");
        let prefix = json!({"type": "ByteLevel", "add_prefix_space": true});
        refuse(doc(prefix), 8, "pre_tokenizer");
        let mut d = doc(smollm());
        d["normalizer"] = json!({"type": "NFC"});
        refuse(d, 8, "normalizer \"NFC\"");
        let mut d = doc(smollm());
        d["model"]["byte_fallback"] = json!(true);
        refuse(d, 8, "byte_fallback");
        let mut d = doc(smollm());
        d["model"]["type"] = json!("WordPiece");
        refuse(d, 8, "model.type \"WordPiece\"");
        // A token id past the embedding's rows, and two tokens on one id.
        refuse(doc(smollm()), 5, "vocab_size 5");
        let mut d = doc(smollm());
        d["model"]["vocab"]["c"] = json!(2);
        refuse(d, 8, "share id 2");
        let mut d = doc(smollm());
        d["model"]["merges"] = json!([["a b", "c"]]);
        refuse(d, 8, "merge");
        let bos = SpecialTokens {
            bos: Some(9),
            ..Default::default()
        };
        let e = tokenizer_metadata(&doc(smollm()).to_string(), 8, &bos, "t").unwrap_err();
        assert!(e.to_string().contains("bos_token_id 9"), "{e}");
    }
}
