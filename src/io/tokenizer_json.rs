//! Checks a Hugging Face `tokenizer.json` document before the `tokenizers` crate builds a
//! tokenizer from it, for the inputs on which that crate panics instead of returning an
//! error (0.23): a syntax error inside the `decoder` (its deserializer calls
//! `expect("Helper")` on the streaming parse), and a `Precompiled` normalizer whose data does
//! not parse (`expect("Precompiled")`). The whole document is parsed once as JSON here, so
//! the crate only ever sees well-formed JSON, and `Precompiled` normalizers (SentencePiece
//! character maps, which no byte-level BPE uses) are refused.

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
}
