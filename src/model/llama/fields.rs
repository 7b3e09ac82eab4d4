//! One typed reader for the settings of a pretrained model, a Hugging Face `config.json` or a
//! GGUF file's `{arch}.*` metadata: every field is read through an accessor that checks its
//! type and names it when wrong (`head_dim: 16.0`, `"2"` for a count, a float where GGUF wants
//! an integer), and [`Fields::finish`] refuses, by name, any field nobody read.
//!
//! Why exhaustive: a field the engine does not know may change the function (a scaling, a
//! window, a quantisation), and reading past it gives plausible but wrong numbers. Fields that
//! only describe the model (token ids, dtypes, versions) are read with [`Fields::ignore`].
//! Integral floats are refused for integer fields, as `transformers` 5 refuses them
//! (`Field 'head_dim' expected int, got float`). JSON `null` means absent, as in
//! `transformers`.

use std::cell::RefCell;

use crate::io::gguf::Value as GgufValue;
use crate::model::ModelError;
use serde_json::Value as JsonValue;

/// One stored value, from either format.
#[derive(Clone, Copy)]
enum Raw<'a> {
    Json(&'a JsonValue),
    Gguf(&'a GgufValue),
}

impl std::fmt::Display for Raw<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Raw::Json(v) => write!(f, "{v}"),
            Raw::Gguf(GgufValue::Str(s)) => write!(f, "{s:?}"),
            Raw::Gguf(GgufValue::Array(..)) => write!(f, "an array"),
            Raw::Gguf(v) => write!(f, "{v:?}"),
        }
    }
}

/// The fields of one settings object, each to be read once by a typed accessor.
pub(crate) struct Fields<'a> {
    /// The file, for messages (`folder/config.json`, `model.gguf`).
    source: String,
    /// Shown before every key in messages (`llama.`, `rope_parameters.`).
    prefix: String,
    entries: Vec<(&'a str, Raw<'a>)>,
    /// Whether each entry has been read.
    read: RefCell<Vec<bool>>,
}

impl<'a> Fields<'a> {
    fn new(source: &str, prefix: &str, entries: Vec<(&'a str, Raw<'a>)>) -> Self {
        let read = RefCell::new(vec![false; entries.len()]);
        Fields {
            source: source.to_string(),
            prefix: prefix.to_string(),
            entries,
            read,
        }
    }

    /// The fields of a JSON object (`config.json`); anything else is refused.
    pub fn json(v: &'a JsonValue, source: &str) -> Result<Self, ModelError> {
        let obj = v.as_object().ok_or_else(|| {
            ModelError::Config(format!(
                "{source}: must be a JSON object, got {v}: fix the file"
            ))
        })?;
        let entries = obj
            .iter()
            .map(|(k, v)| (k.as_str(), Raw::Json(v)))
            .collect();
        Ok(Fields::new(source, "", entries))
    }

    /// The `{arch}.*` keys of GGUF metadata (other keys belong to other readers: `general.*`
    /// describes, `tokenizer.*` is the tokenizer's).
    pub fn gguf(meta: &'a [(String, GgufValue)], arch: &str, source: &str) -> Self {
        let prefix = format!("{arch}.");
        let entries = meta
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(prefix.as_str())?, Raw::Gguf(v))))
            .collect();
        Fields::new(source, &prefix, entries)
    }

    /// The full name of `key`, as the file spells it.
    pub fn name(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// An error about this file: `{source}: {what}`.
    pub fn error(&self, what: String) -> ModelError {
        ModelError::Config(format!("{}: {what}", self.source))
    }

    /// Marks `key` read and returns its value (`None` when absent or JSON null).
    fn take(&self, key: &str) -> Option<Raw<'a>> {
        let i = self.entries.iter().position(|(k, _)| *k == key)?;
        self.read.borrow_mut()[i] = true;
        match self.entries[i].1 {
            Raw::Json(JsonValue::Null) => None,
            v => Some(v),
        }
    }

    fn mistyped(&self, key: &str, want: &str, got: Raw<'_>) -> ModelError {
        self.error(format!(
            "{} must be {want}, got {got}: fix the file",
            self.name(key)
        ))
    }

    /// A whole number `≥ 0` (a JSON integer; a GGUF integer of any width); `16.0`, `"16"` and
    /// `true` are refused by name.
    pub fn int(&self, key: &str) -> Result<Option<u64>, ModelError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        let n = match v {
            Raw::Json(j) => j.as_u64(),
            Raw::Gguf(g) => g.as_u64(),
        };
        n.map(Some)
            .ok_or_else(|| self.mistyped(key, "a non-negative integer", v))
    }

    /// A whole number that must be present.
    pub fn req_int(&self, key: &str) -> Result<u64, ModelError> {
        self.int(key)?
            .ok_or_else(|| self.error(format!("{} is missing: fix the file", self.name(key))))
    }

    /// A finite number (integers accepted).
    pub fn float(&self, key: &str) -> Result<Option<f64>, ModelError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        let x = match v {
            Raw::Json(j) => j.as_f64(),
            Raw::Gguf(g) => g.as_f64(),
        };
        x.filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| self.mistyped(key, "a finite number", v))
    }

    /// `true` or `false`.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ModelError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        match v {
            Raw::Json(JsonValue::Bool(b)) | Raw::Gguf(GgufValue::Bool(b)) => Ok(Some(*b)),
            _ => Err(self.mistyped(key, "true or false", v)),
        }
    }

    /// A string.
    pub fn string(&self, key: &str) -> Result<Option<&'a str>, ModelError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        match v {
            Raw::Json(JsonValue::String(s)) | Raw::Gguf(GgufValue::Str(s)) => Ok(Some(s)),
            _ => Err(self.mistyped(key, "a string", v)),
        }
    }

    /// A list of strings (JSON only).
    pub fn strings(&self, key: &str) -> Result<Option<Vec<&'a str>>, ModelError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        let list = match v {
            Raw::Json(JsonValue::Array(a)) => a.iter().map(JsonValue::as_str).collect(),
            _ => None,
        };
        list.map(Some)
            .ok_or_else(|| self.mistyped(key, "a list of strings", v))
    }

    /// A nested JSON object, itself read field by field (its keys named `key.field`).
    pub fn object(&self, key: &str) -> Result<Option<Fields<'a>>, ModelError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        match v {
            Raw::Json(JsonValue::Object(o)) => {
                let entries = o.iter().map(|(k, v)| (k.as_str(), Raw::Json(v))).collect();
                Ok(Some(Fields::new(
                    &self.source,
                    &format!("{}{key}.", self.prefix),
                    entries,
                )))
            }
            _ => Err(self.mistyped(key, "a JSON object", v)),
        }
    }

    /// Reads fields that only describe the model, whatever they hold.
    pub fn ignore(&self, keys: &[&str]) {
        for k in keys {
            self.take(k);
        }
    }

    /// The full name of the first field nobody read, if any (a JSON null is as good as
    /// absent).
    pub fn first_unread(&self) -> Option<String> {
        let read = self.read.borrow();
        self.entries
            .iter()
            .zip(read.iter())
            .find(|((_, v), r)| !**r && !matches!(v, Raw::Json(JsonValue::Null)))
            .map(|((k, _), _)| self.name(k))
    }

    /// Refuses the first field nobody read, by name: the engine cannot tell whether it
    /// changes the model.
    pub fn finish(&self) -> Result<(), ModelError> {
        match self.first_unread() {
            None => Ok(()),
            Some(k) => Err(self.error(format!(
                "unknown field {k}: the engine cannot tell whether it changes the model, so the \
                 model is refused; remove the field if it only describes the model"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mistyped_fields_are_named() {
        let v = json!({"a": 16.0, "b": "2", "c": true, "d": 4, "e": null, "f": "x", "g": 1e-6});
        let f = Fields::json(&v, "c.json").unwrap();
        for (key, e) in [
            ("a", f.int("a").unwrap_err()),
            ("b", f.int("b").unwrap_err()),
            ("c", f.int("c").unwrap_err()),
            ("f", f.float("f").unwrap_err()),
        ] {
            let e = e.to_string();
            assert!(e.contains(&format!("c.json: {key} must be")), "{e}");
        }
        assert_eq!(f.int("d").unwrap(), Some(4));
        assert_eq!(f.int("e").unwrap(), None);
        assert_eq!(f.float("g").unwrap(), Some(1e-6));
        f.finish().unwrap();
    }

    #[test]
    fn unread_fields_are_refused_by_name() {
        let v = json!({"vocab_size": 3, "foo_bar": 1, "null_one": null});
        let f = Fields::json(&v, "c.json").unwrap();
        f.int("vocab_size").unwrap();
        let e = f.finish().unwrap_err().to_string();
        assert!(e.contains("unknown field foo_bar"), "{e}");
        let nested = json!({"p": {"x": 1}});
        let f = Fields::json(&nested, "c.json").unwrap();
        let p = f.object("p").unwrap().unwrap();
        let e = p.finish().unwrap_err().to_string();
        assert!(e.contains("unknown field p.x"), "{e}");
    }

    #[test]
    fn gguf_keys_are_read_under_their_architecture() {
        let meta = vec![
            ("llama.block_count".to_string(), GgufValue::F32(2.0)),
            (
                "llama.rope.freq_base".to_string(),
                GgufValue::Str("1e4".into()),
            ),
            ("general.name".to_string(), GgufValue::Str("x".into())),
        ];
        let f = Fields::gguf(&meta, "llama", "m.gguf");
        let e = f.int("block_count").unwrap_err().to_string();
        assert!(
            e.contains("llama.block_count must be a non-negative integer"),
            "{e}"
        );
        let e = f.float("rope.freq_base").unwrap_err().to_string();
        assert!(
            e.contains("llama.rope.freq_base must be a finite number"),
            "{e}"
        );
        f.finish().unwrap();
    }
}
