//! The options of a `tokenizer.json` the tool accepts, checked before the `tokenizers` crate
//! sees them (part of [`crate::io::tokenizer_json::check`]).
//!
//! A tokenizer.json is code the crate runs on every text: options that look harmless make it
//! allocate without bound or panic. Each rule below stops one of them:
//! - `padding` to a fixed length or a multiple pads every encoding to it (a `Fixed` of 10^12
//!   asks for terabytes), and `truncation` cuts every text (whose `stride` not below its
//!   `max_length` panics in `Encoding::truncate`). This tool encodes whole texts, one at a
//!   time, and scores or continues all of them, so padding would add tokens to a score and
//!   truncation would drop them: both are refused (padding `BatchLongest` with no multiple,
//!   which leaves a single text alone, is accepted);
//! - a `FixedLength` pre-tokenizer of length 0 panics (`chunks(0)`), and so does a `Strip`
//!   decoder whose `stop` is longer than a token (it indexes from the end without a bound);
//! - `Replace` and `Prepend` normalizers (and the `Replace` decoder) insert their content at
//!   every match: an empty pattern matches everywhere, and a long content multiplies the
//!   text by its length;
//! - components must be of a type the crate knows (listed here: the ones Hugging Face model
//!   repositories use), nested at most [`MAX_DEPTH`] deep, at most [`MAX_PARTS`] in a sequence.

use serde_json::{Map, Value};

/// The longest text a normalizer, pre-tokenizer or decoder may insert (pad token, `Replace`
/// content, `Prepend`), in bytes.
pub const MAX_INSERT: usize = 256;
/// The longest pattern (string or regex) accepted, in bytes.
pub const MAX_PATTERN: usize = 4096;
/// Deepest nesting of `Sequence` components.
pub const MAX_DEPTH: usize = 8;
/// Most components in one `Sequence`.
pub const MAX_PARTS: usize = 64;

const NORMALIZERS: &[&str] = &[
    "BertNormalizer",
    "ByteLevel",
    "Lowercase",
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
    "Nmt",
    "Prepend",
    "Replace",
    "Sequence",
    "Strip",
    "StripAccents",
];
const PRE_TOKENIZERS: &[&str] = &[
    "BertPreTokenizer",
    "ByteLevel",
    "CharDelimiterSplit",
    "Digits",
    "FixedLength",
    "Metaspace",
    "Punctuation",
    "Sequence",
    "Split",
    "UnicodeScripts",
    "Whitespace",
    "WhitespaceSplit",
];
const DECODERS: &[&str] = &[
    "BPEDecoder",
    "ByteFallback",
    "ByteLevel",
    "CTC",
    "Fuse",
    "Metaspace",
    "Replace",
    "Sequence",
    "Strip",
    "WordPiece",
];
const POST_PROCESSORS: &[&str] = &[
    "BertProcessing",
    "ByteLevel",
    "RobertaProcessing",
    "Sequence",
    "TemplateProcessing",
];

/// Checks the options of the document `obj` by the rules of the module doc.
pub fn check_options(obj: &Map<String, Value>) -> Result<(), String> {
    if let Some(p) = obj.get("padding").filter(|v| !v.is_null()) {
        check_padding(p)?;
    }
    if let Some(t) = obj.get("truncation").filter(|v| !v.is_null()) {
        check_truncation(t)?;
    }
    for (key, known, list) in [
        ("normalizer", NORMALIZERS, "normalizers"),
        ("pre_tokenizer", PRE_TOKENIZERS, "pretokenizers"),
        ("decoder", DECODERS, "decoders"),
        ("post_processor", POST_PROCESSORS, "processors"),
    ] {
        if let Some(v) = obj.get(key).filter(|v| !v.is_null()) {
            check_component(key, v, known, list, 0)?;
        }
    }
    if let Some(added) = obj.get("added_tokens").and_then(Value::as_array) {
        for t in added {
            if t.get("content").and_then(Value::as_str) == Some("") {
                return Err("an added token has empty content (it would match everywhere)".into());
            }
        }
    }
    Ok(())
}

fn short(v: Option<&Value>, what: &str, max: usize) -> Result<(), String> {
    match v.and_then(Value::as_str) {
        Some(s) if s.len() > max => Err(format!(
            "{what} is {} bytes long: this tool accepts at most {max}",
            s.len()
        )),
        _ => Ok(()),
    }
}

/// Padding that leaves a single encoding alone (`BatchLongest`, no multiple), or an error.
fn check_padding(p: &Value) -> Result<(), String> {
    let longest = p.get("strategy").and_then(Value::as_str) == Some("BatchLongest");
    let multiple = p
        .get("pad_to_multiple_of")
        .is_some_and(|m| !m.is_null() && m.as_u64() != Some(1));
    if !longest || multiple {
        return Err(
            "padding to a fixed length or a multiple is set: this tool scores whole texts, to \
             which padding would add tokens (set \"padding\": null)"
                .into(),
        );
    }
    Ok(())
}

fn check_truncation(t: &Value) -> Result<(), String> {
    let max = t.get("max_length").map_or("?".into(), |m| m.to_string());
    Err(format!(
        "truncation is set (max_length {max}): this tool scores and continues whole texts, \
         which truncation would cut (set \"truncation\": null)"
    ))
}

/// One normalizer, pre-tokenizer, decoder or post-processor (`key` names which), with the
/// components of a `Sequence` under `list`.
fn check_component(
    key: &str,
    v: &Value,
    known: &[&str],
    list: &str,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "{key} Sequences are nested more than {MAX_DEPTH} deep"
        ));
    }
    let ty = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("a {key} has no \"type\""))?;
    if !known.contains(&ty) {
        return Err(format!(
            "{key} type {ty:?} is not supported (supported: {})",
            known.join(", ")
        ));
    }
    match ty {
        "Sequence" => {
            let parts = v
                .get(list)
                .and_then(Value::as_array)
                .ok_or_else(|| format!("a {key} Sequence has no {list:?} list"))?;
            if parts.len() > MAX_PARTS {
                return Err(format!(
                    "a {key} Sequence has {} parts: this tool accepts at most {MAX_PARTS}",
                    parts.len()
                ));
            }
            for part in parts {
                check_component(key, part, known, list, depth + 1)?;
            }
        }
        "Replace" => {
            match v.get("pattern") {
                Some(Value::Object(p)) => match (p.get("String"), p.get("Regex")) {
                    (Some(Value::String(s)), None) if s.is_empty() => {
                        return Err(format!(
                            "a {key} Replace has an empty pattern (it would match everywhere)"
                        ));
                    }
                    (Some(s), None) | (None, Some(s)) => {
                        short(Some(s), &format!("a {key} Replace pattern"), MAX_PATTERN)?
                    }
                    _ => return Err(format!("a {key} Replace pattern is not String or Regex")),
                },
                _ => return Err(format!("a {key} Replace has no pattern")),
            }
            short(
                v.get("content"),
                &format!("a {key} Replace content"),
                MAX_INSERT,
            )?;
        }
        // `Strip::decode_chain` indexes from a token's end without a bound: a `stop` longer
        // than a token panics. Real tokenizers strip at the start only.
        "Strip"
            if key == "decoder" && v.get("stop").and_then(Value::as_u64).is_some_and(|n| n > 0) =>
        {
            return Err("a Strip decoder with stop > 0 is not supported (use 0)".into());
        }
        "Prepend" => short(v.get("prepend"), "a Prepend normalizer's text", MAX_INSERT)?,
        // `chunks(0)` panics; any positive length is harmless.
        "FixedLength"
            if v.get("length")
                .is_some_and(|n| n.as_u64().is_none_or(|n| n == 0)) =>
        {
            return Err("the FixedLength pre-tokenizer's length must be at least 1".into());
        }
        "Split" => {
            if let Some(p) = v.get("pattern").and_then(Value::as_object) {
                let s = p.get("String").or_else(|| p.get("Regex"));
                short(s, "a Split pattern", MAX_PATTERN)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(doc: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(doc).unwrap();
        check_options(v.as_object().unwrap())
    }

    #[test]
    fn padding_and_truncation_that_change_a_text_are_refused() {
        assert!(check(r#"{"padding": null, "truncation": null}"#).is_ok());
        let pad = |s: &str| format!(r#"{{"padding": {{"strategy": {s}, "pad_token": "x"}}}}"#);
        assert!(check(&pad(r#""BatchLongest""#)).is_ok());
        assert!(
            check(&pad(r#"{"Fixed": 512}"#))
                .unwrap_err()
                .contains("padding")
        );
        assert!(check(&pad(r#"{"Fixed": 1000000000000}"#)).is_err());
        let multiple = r#"{"padding": {"strategy": "BatchLongest", "pad_to_multiple_of": 1e12}}"#;
        assert!(check(multiple).is_err());
        let trunc = r#"{"truncation": {"max_length": 512, "stride": 512}}"#;
        assert!(check(trunc).unwrap_err().contains("max_length 512"));
    }

    #[test]
    fn components_are_known_bounded_and_never_match_everywhere() {
        assert!(check(r#"{"normalizer": {"type": "NFC"}}"#).is_ok());
        assert!(
            check(r#"{"normalizer": {"type": "Teleport"}}"#)
                .unwrap_err()
                .contains("Teleport")
        );
        let empty =
            r#"{"normalizer": {"type": "Replace", "pattern": {"String": ""}, "content": "x"}}"#;
        assert!(check(empty).unwrap_err().contains("empty pattern"));
        let long = format!(
            r#"{{"normalizer": {{"type": "Replace", "pattern": {{"String": "a"}}, "content": "{}"}}}}"#,
            "x".repeat(MAX_INSERT + 1)
        );
        assert!(check(&long).is_err());
        assert!(check(r#"{"pre_tokenizer": {"type": "FixedLength", "length": 0}}"#).is_err());
        let mut nested = r#"{"type": "NFC"}"#.to_string();
        for _ in 0..=MAX_DEPTH {
            nested = format!(r#"{{"type": "Sequence", "normalizers": [{nested}]}}"#);
        }
        assert!(
            check(&format!(r#"{{"normalizer": {nested}}}"#))
                .unwrap_err()
                .contains("nested")
        );
        assert!(check(r#"{"added_tokens": [{"id": 0, "content": ""}]}"#).is_err());
    }
}
