//! The library's error type: one enum at the boundary, one variant per subsystem, each
//! wrapping that subsystem's own typed error. The binary adds context with `anyhow`.

use std::path::PathBuf;

/// Any error the library returns.
///
/// Its `Display` is one line: control characters that a message quotes from its input (a
/// path, a token, a key read from a hostile file) are written as escapes (`\n`), so a
/// message never breaks the one-line rule of the command line.
#[derive(Debug)]
pub enum Error {
    /// Reading or writing a file failed. The message names the path; the operating system's
    /// reason is the cause (`source`), printed by the error chain.
    Io {
        /// The file involved.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Bad arguments to an initialiser (shape, gain, method).
    Init(crate::init::InitError),
    /// A file format problem (npy, safetensors, GGUF).
    Format(crate::io::FormatError),
    /// A model configuration or checkpoint does not make sense.
    Model(crate::model::ModelError),
    /// A dataset or tokenizer problem.
    Data(crate::data::DataError),
    /// Training stopped (non-finite loss, interrupted, bad options).
    Train(crate::train::TrainError),
    /// Rotation or alignment of a pretrained model failed.
    Rotate(crate::rotate::RotateError),
    /// Quantisation of a pretrained model failed.
    Quant(crate::quant::QuantError),
    /// The MQAR benchmark harness (bad task shape, plot failure).
    Mqar(crate::analysis::mqar::MqarError),
    /// A theory measurement (shape mismatch, plot failure).
    Theory(crate::analysis::theory::TheoryError),
    /// A scaling-law fit or its bootstrap (too few sizes or seeds, bad points).
    Scaling(crate::analysis::scaling::ScalingError),
    /// A request too large for this machine's memory, or whose size overflows.
    Memory(crate::io::memory::MemoryError),
}

impl Error {
    /// The wrapped subsystem error (`None` for [`Error::Io`]).
    fn inner(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(match self {
            Error::Io { .. } => return None,
            Error::Init(e) => e,
            Error::Format(e) => e,
            Error::Model(e) => e,
            Error::Data(e) => e,
            Error::Train(e) => e,
            Error::Rotate(e) => e,
            Error::Quant(e) => e,
            Error::Mqar(e) => e,
            Error::Theory(e) => e,
            Error::Scaling(e) => e,
            Error::Memory(e) => e,
        })
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match (self, self.inner()) {
            (Error::Io { path, .. }, _) => path.display().to_string(),
            (_, Some(e)) => e.to_string(),
            (_, None) => String::new(),
        };
        f.write_str(&printable(&text))
    }
}

impl std::error::Error for Error {
    // As `#[error(transparent)]`: the subsystem error's own message is this one's, so the
    // chain goes on with its cause.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => self.inner().and_then(|e| e.source()),
        }
    }
}

macro_rules! from_subsystem {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        $(impl From<$ty> for Error {
            fn from(e: $ty) -> Self {
                Error::$variant(e)
            }
        })*
    };
}

from_subsystem!(
    Init(crate::init::InitError),
    Format(crate::io::FormatError),
    Model(crate::model::ModelError),
    Data(crate::data::DataError),
    Train(crate::train::TrainError),
    Rotate(crate::rotate::RotateError),
    Quant(crate::quant::QuantError),
    Mqar(crate::analysis::mqar::MqarError),
    Theory(crate::analysis::theory::TheoryError),
    Scaling(crate::analysis::scaling::ScalingError),
    Memory(crate::io::memory::MemoryError),
);

/// `text` with every control character (newline, carriage return, NUL, ...) written as its
/// escape, so quoted input cannot break a message's line.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// `Result` with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `err` and its causes on one line, `"a: b: c"`, for messages that keep only text (an I/O
/// error's message names the path and leaves the operating system's reason to its cause).
/// Whitespace runs, newlines included, become one space.
pub fn one_line(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    let mut cause = Some(err);
    while let Some(e) = cause {
        let text = e
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !text.is_empty() && !line.ends_with(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        cause = e.source();
    }
    line
}

/// `line` with every option field the library names in backticks (`` `check_tokens` ``,
/// `` `adamw.beta1` ``) written as a front end calls it: `flag("check_tokens")` gives
/// `--check-tokens` on the command line, the keyword `check_tokens` in Python. Library
/// messages name fields, never flags, so each front end speaks its own language.
pub fn name_fields(line: &str, flag: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let field = after.find('`').map(|end| &after[..end]).filter(|f| {
            f.starts_with(|c: char| c.is_ascii_lowercase())
                && f.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
        });
        match field {
            Some(f) => {
                out.push_str(&flag(f));
                rest = &after[f.len() + 1..];
            }
            None => {
                out.push('`');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_become_the_front_ends_names() {
        let flag = |f: &str| format!("--{}", f.replace('_', "-"));
        assert_eq!(
            name_fields(
                "`check_tokens` must be at least 1; see `orthoformer x`",
                flag
            ),
            "--check-tokens must be at least 1; see `orthoformer x`"
        );
        assert_eq!(
            name_fields("a ` b `Lr` `", |f| f.to_string()),
            "a ` b `Lr` `"
        );
    }

    #[test]
    fn messages_quote_input_on_one_line() {
        let e = Error::io("a\nb\0.txt", std::io::Error::other("x"));
        assert_eq!(e.to_string(), "a\\nb\\u{0}.txt");
        let m: Error = crate::model::ModelError::Config("token \"\n\"".into()).into();
        assert_eq!(m.to_string(), "invalid model configuration: token \"\\n\"");
    }

    #[test]
    fn one_line_keeps_the_cause() {
        let e = Error::io("x.svg", std::io::Error::other("No space left\non device"));
        assert_eq!(one_line(&e), "x.svg: No space left on device");
    }
}
