//! Corpora: a UTF-8 text file given by the user, or TinyShakespeare embedded in the binary
//! (the default). Loading checks that the text is usable for language modelling: the file
//! exists, is not empty, is not binary (no NUL bytes) and is valid UTF-8. Each failure is an
//! error naming the file and what to do.

use std::path::Path;

use super::invalid;
use crate::Result;

/// TinyShakespeare (1,115,394 bytes), shipped in `data/` and embedded so the default works
/// from any folder.
pub const TINY_SHAKESPEARE: &str = include_str!("../../data/tinyshakespeare.txt");

/// The name recorded for the embedded corpus in checkpoints and summaries.
pub const TINY_SHAKESPEARE_NAME: &str = "tinyshakespeare (embedded)";

/// A loaded text and where it came from.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// The text.
    pub text: String,
    /// A file path, or [`TINY_SHAKESPEARE_NAME`].
    pub source: String,
}

impl Corpus {
    /// The embedded TinyShakespeare.
    pub fn tiny_shakespeare() -> Self {
        Corpus {
            text: TINY_SHAKESPEARE.to_string(),
            source: TINY_SHAKESPEARE_NAME.to_string(),
        }
    }

    /// `path` if given, else the embedded TinyShakespeare.
    pub fn load_or_default(path: Option<&Path>) -> Result<Self> {
        match path {
            Some(p) => Self::load(p),
            None => Ok(Self::tiny_shakespeare()),
        }
    }

    /// Reads and checks a UTF-8 text file.
    pub fn load(path: &Path) -> Result<Self> {
        let shown = path.display();
        if path.is_dir() {
            return Err(invalid(format!(
                "data {shown} is a folder: pass a UTF-8 text file as `data`"
            )));
        }
        let bytes = crate::io::safe_file::read_regular(path)?;
        let text = check_text(&bytes).map_err(|why| invalid(format!("data {shown} {why}")))?;
        Ok(Corpus {
            text,
            source: path.display().to_string(),
        })
    }
}

/// Checks that `bytes` are a usable text; the error completes "data FILE ...".
fn check_text(bytes: &[u8]) -> std::result::Result<String, String> {
    if bytes.is_empty() {
        return Err("is empty: pass a file with some text in it".into());
    }
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(format!(
            "looks binary (a NUL byte at offset {at}): pass a UTF-8 text file"
        ));
    }
    match std::str::from_utf8(bytes) {
        Ok(s) if s.trim().is_empty() => {
            Err("holds only whitespace: pass a file with some text in it".into())
        }
        Ok(s) => Ok(s.to_string()),
        Err(e) => Err(format!(
            "is not valid UTF-8 (first bad byte at offset {}): convert it to UTF-8, e.g. \
             `iconv -f latin1 -t utf-8`",
            e.valid_up_to()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_corpus_is_tiny_shakespeare() {
        assert_eq!(TINY_SHAKESPEARE.len(), 1_115_394);
        assert!(TINY_SHAKESPEARE.starts_with("First Citizen:"));
    }

    #[test]
    fn bad_texts_are_rejected_with_a_reason() {
        assert!(check_text(b"").unwrap_err().contains("empty"));
        assert!(check_text(b" \n\t").unwrap_err().contains("whitespace"));
        assert!(check_text(b"ab\0cd").unwrap_err().contains("binary"));
        assert!(check_text(b"caf\xe9").unwrap_err().contains("UTF-8"));
        assert_eq!(check_text("café".as_bytes()).unwrap(), "café");
    }
}
