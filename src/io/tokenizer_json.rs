//! Checks a Hugging Face `tokenizer.json` document before the `tokenizers` crate builds a
//! tokenizer from it, for the inputs on which that crate (0.23) panics instead of returning
//! an error:
//! - a syntax error inside the `decoder` (its deserializer calls `expect("Helper")` on the
//!   streaming parse): the whole document is parsed once as JSON here, so the crate only
//!   ever sees well-formed JSON;
//! - a `Precompiled` normalizer whose data does not parse (`expect("Precompiled")`):
//!   refused (SentencePiece character maps, which no byte-level BPE uses);
//! - a BPE merge whose pieces or result are not in the vocabulary, or whose second piece
//!   does not start with the `continuing_subword_prefix` (`BpeBuilder::build` slices a
//!   buffer by their lengths before it looks them up): every merge `a b` must have `a`, `b`
//!   and `a + b` (without the prefix) in the vocabulary, as the crate then requires anyway;
//! - options that allocate without bound or panic when a text is encoded (padding,
//!   truncation, normalizers, pre-tokenizers, decoders): [`super::tokenizer_limits`].
//!
//! The crate is still called through [`super::guard::guarded`], which turns a panic left in
//! it into an error: a last line of defence, not the first.

use serde_json::Value;

/// Checks `text` as described in the module doc; the error says what is wrong, in words.
pub fn check(text: &str) -> Result<(), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    let Some(obj) = doc.as_object() else {
        return Err("the document is not a JSON object".into());
    };
    if let Some(n) = obj.get("normalizer")
        && has_type(n, "Precompiled")
    {
        return Err(
            "its normalizer is Precompiled (a SentencePiece character map), which is not \
             supported: use a byte-level BPE tokenizer"
                .into(),
        );
    }
    super::tokenizer_limits::check_options(obj)?;
    if let Some(model) = obj.get("model") {
        check_bpe_merges(model)?;
    }
    Ok(())
}

/// The merges rule of the module doc, for a BPE model (one with `vocab` and `merges`).
fn check_bpe_merges(model: &Value) -> Result<(), String> {
    let (Some(vocab), Some(merges)) = (
        model.get("vocab").and_then(Value::as_object),
        model.get("merges").and_then(Value::as_array),
    ) else {
        return Ok(()); // Not a BPE model, or the crate reports what is missing.
    };
    let prefix = model
        .get("continuing_subword_prefix")
        .and_then(Value::as_str)
        .unwrap_or("");
    for (i, m) in merges.iter().enumerate() {
        let (a, b) = match m {
            Value::String(s) => match s.split_once(' ') {
                Some(p) => p,
                None => continue, // The crate reports a merge without a space.
            },
            Value::Array(p) => match (p.first().and_then(Value::as_str), p.get(1)) {
                (Some(a), Some(Value::String(b))) if p.len() == 2 => (a, b.as_str()),
                _ => continue, // Not a pair of strings: the crate's own error.
            },
            _ => continue,
        };
        let Some(rest) = b.strip_prefix(prefix) else {
            return Err(format!(
                "merge {i} ({a:?} {b:?}) does not start its second piece with the \
                 continuing_subword_prefix {prefix:?}"
            ));
        };
        let merged = format!("{a}{rest}");
        for piece in [a, b, merged.as_str()] {
            if !vocab.contains_key(piece) {
                return Err(format!(
                    "merge {i} ({a:?} {b:?}): {piece:?} is not in the vocabulary"
                ));
            }
        }
    }
    Ok(())
}

/// Whether `v` or anything nested in it is an object with `"type": ty`.
fn has_type(v: &Value, ty: &str) -> bool {
    match v {
        Value::Object(m) => {
            m.get("type").and_then(Value::as_str) == Some(ty) || m.values().any(|x| has_type(x, ty))
        }
        Value::Array(a) => a.iter().any(|x| has_type(x, ty)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_json_and_precompiled_normalizers() {
        assert!(check(r#"{"decoder": {"type": "ByteLevel", "x": tru}}"#).is_err());
        assert!(check("[1]").is_err());
        let seq = r#"{"normalizer": {"type": "Sequence", "normalizers": [{"type": "Precompiled",
                     "precompiled_charsmap": "AAAA"}]}}"#;
        assert!(check(seq).unwrap_err().contains("Precompiled"));
        assert!(check(r#"{"normalizer": null, "decoder": {"type": "ByteLevel"}}"#).is_ok());
    }

    #[test]
    fn merges_must_be_made_of_vocabulary_tokens() {
        let doc = |prefix: &str, merges: &str| {
            format!(
                r#"{{"model": {{"type": "BPE", "continuing_subword_prefix": {prefix},
                   "vocab": {{"a": 0, "b": 1, "ab": 2, "@@b": 3}}, "merges": {merges}}}}}"#
            )
        };
        assert!(check(&doc("null", r#"[["a", "b"]]"#)).is_ok());
        assert!(check(&doc("null", r#"["a b"]"#)).is_ok());
        assert!(
            check(&doc("null", r#"[["ab", "ab"]]"#))
                .unwrap_err()
                .contains("abab")
        );
        assert!(check(&doc("null", r#"[["a", "c"]]"#)).is_err());
        assert!(check(&doc(r#""@@""#, r#"[["a", "@@b"]]"#)).is_ok());
        assert!(
            check(&doc(r#""@@""#, r#"[["a", "b"]]"#))
                .unwrap_err()
                .contains("prefix")
        );
    }
}
