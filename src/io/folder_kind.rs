//! Typed output folders: every folder Orthoformer writes records what it is in a one-line
//! marker file, `.orthoformer`, so that no command writes into a folder another command made
//! (exporting over a training checkpoint, training into a Hugging Face model) or into a
//! non-empty folder Orthoformer did not make. A command checks before it writes anything.

use std::path::Path;

use crate::io::FormatError;
use crate::{Error, Result};

/// The marker file's name.
pub const MARKER: &str = ".orthoformer";

/// First word of the marker line.
const MAGIC: &str = "orthoformer-folder";

/// What an output folder holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolderKind {
    /// A training checkpoint (`train --out`, each run of a comparison, the Python trainer).
    Checkpoint,
    /// A comparison of attention variants (`compare --out`).
    Compare,
    /// A Llama-family model as a Hugging Face folder (`rotate --out`).
    HfLlama,
    /// A trained GPT as a Hugging Face GPT-2 folder (`export --out`).
    HfGpt2,
    /// Reports and figures (`theory`, `mqar`, `init-probe`).
    Report,
    /// A size ladder (`ladder --out`, `python -m orthoformer.ladder --out`).
    Ladder,
}

impl FolderKind {
    const ALL: [FolderKind; 6] = [
        FolderKind::Checkpoint,
        FolderKind::Compare,
        FolderKind::HfLlama,
        FolderKind::HfGpt2,
        FolderKind::Report,
        FolderKind::Ladder,
    ];

    /// The marker's name of the kind.
    pub fn name(self) -> &'static str {
        match self {
            FolderKind::Checkpoint => "checkpoint",
            FolderKind::Compare => "compare",
            FolderKind::HfLlama => "hf-llama",
            FolderKind::HfGpt2 => "hf-gpt2",
            FolderKind::Report => "report",
            FolderKind::Ladder => "ladder",
        }
    }

    /// The kind in words, with the command that makes it.
    pub fn describe(self) -> &'static str {
        match self {
            FolderKind::Checkpoint => "a training checkpoint (made by `orthoformer train`)",
            FolderKind::Compare => "a comparison (made by `orthoformer compare`)",
            FolderKind::HfLlama => "a Hugging Face Llama model (made by `orthoformer rotate`)",
            FolderKind::HfGpt2 => "a Hugging Face GPT-2 model (made by `orthoformer export`)",
            FolderKind::Report => {
                "reports and figures (made by orthoformer theory, mqar or init-probe)"
            }
            FolderKind::Ladder => "a size ladder (made by `orthoformer ladder`)",
        }
    }

    fn from_name(name: &str) -> Option<FolderKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether a folder of kind `found` may receive this kind's files: the same kind, or a
    /// report written into a checkpoint (`theory` writes beside the checkpoint it reads).
    fn accepts(self, found: FolderKind) -> bool {
        self == found || (self == FolderKind::Report && found == FolderKind::Checkpoint)
    }

    /// Files that mark a folder of this kind written before markers existed.
    fn legacy_signature(self) -> &'static [&'static str] {
        match self {
            FolderKind::Checkpoint => &["state.json"],
            FolderKind::Compare => &["plan.json"],
            _ => &[],
        }
    }
}

fn refuse(dir: &Path, what: String) -> Error {
    FormatError::Malformed {
        path: dir.display().to_string(),
        what,
    }
    .into()
}

/// The kind a folder's marker records: `Ok(None)` when it has none.
pub fn read(dir: &Path) -> Result<Option<FolderKind>> {
    if std::fs::symlink_metadata(dir.join(MARKER)).is_err() {
        return Ok(None);
    }
    let text = crate::io::safe_file::read_text_in(dir, MARKER)?;
    let kind = text
        .trim_end()
        .strip_prefix(MAGIC)
        .and_then(|r| r.strip_prefix(' '))
        .and_then(FolderKind::from_name);
    match kind {
        Some(k) => Ok(Some(k)),
        None => Err(refuse(
            &dir.join(MARKER),
            "is not an Orthoformer folder marker: remove it if the folder is yours".to_string(),
        )),
    }
}

/// Checks that `kind`'s files may be written into `dir`: it does not exist yet, or it is
/// empty, or its marker says a kind that accepts them, or (no marker) it is a folder of this
/// kind from before markers existed. Otherwise one line says what is there.
pub fn check(dir: &Path, kind: FolderKind) -> Result<()> {
    let Ok(meta) = std::fs::metadata(dir) else {
        // Nothing there (or nothing reachable): the command's own creation of the folder
        // reports why it cannot be made.
        return Ok(());
    };
    if !meta.is_dir() {
        return Err(refuse(
            dir,
            format!(
                "is a file, not a folder: choose a folder for {}",
                kind.describe()
            ),
        ));
    }
    if let Some(found) = read(dir)? {
        if kind.accepts(found) {
            return Ok(());
        }
        return Err(refuse(
            dir,
            format!(
                "holds {}, not {}: choose another folder",
                found.describe(),
                kind.describe()
            ),
        ));
    }
    // Orthoformer's own working files do not make a folder foreign: another process of the
    // same run (a second rank of a data-parallel trainer) may be claiming it right now.
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !is_working_file(n))
        .collect();
    names.sort();
    if names.is_empty()
        || kind
            .legacy_signature()
            .iter()
            .any(|f| names.iter().any(|n| n == f))
    {
        return Ok(());
    }
    let shown: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
    let more = if names.len() > 3 { ", ..." } else { "" };
    Err(refuse(
        dir,
        format!(
            "is not empty and was not made by Orthoformer (it holds {}{more}): choose a new or \
             empty folder",
            shown.join(", ")
        ),
    ))
}

/// Files Orthoformer makes while it claims a folder or writes a set into it: the marker and
/// its temporary copies, the write probe, a set's lock, staged files and commit record.
fn is_working_file(name: &str) -> bool {
    // `write_atomic`'s temporary copy of the marker is `..orthoformer.PID.tmp`.
    (name.starts_with('.') && name.trim_start_matches('.').starts_with("orthoformer"))
        || name.starts_with(".write-test")
        || name
            .strip_prefix('.')
            .and_then(|r| r.split_once('.'))
            .is_some_and(|(tag, kind)| {
                !tag.is_empty()
                    && (kind == "lock" || kind.starts_with("new.") || kind.starts_with("commit"))
            })
}

/// Writes `dir`'s marker (atomically; `dir` exists).
pub fn mark(dir: &Path, kind: FolderKind) -> Result<()> {
    if read(dir)? == Some(kind) {
        return Ok(());
    }
    let line = format!("{MAGIC} {}\n", kind.name());
    crate::io::write_atomic_bytes(&dir.join(MARKER), line.as_bytes())
}

/// [`check`], then creates `dir` if needed and marks it as `kind` (a report written into a
/// checkpoint keeps the checkpoint's marker).
pub fn claim(dir: &Path, kind: FolderKind) -> Result<()> {
    check(dir, kind)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    match read(dir)? {
        Some(found) if found != kind => Ok(()),
        _ => mark(dir, kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("of-kind-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn kinds_refuse_each_other_and_foreign_folders() {
        let d = scratch("kinds");
        claim(&d, FolderKind::Checkpoint).unwrap();
        assert_eq!(read(&d).unwrap(), Some(FolderKind::Checkpoint));
        claim(&d, FolderKind::Checkpoint).unwrap();
        claim(&d, FolderKind::Report).unwrap();
        assert_eq!(read(&d).unwrap(), Some(FolderKind::Checkpoint));
        let err = check(&d, FolderKind::HfLlama).unwrap_err().to_string();
        assert!(err.contains("holds a training checkpoint"), "{err}");

        let foreign = scratch("foreign");
        std::fs::create_dir_all(&foreign).unwrap();
        std::fs::write(foreign.join("config.json"), b"{}").unwrap();
        let err = check(&foreign, FolderKind::Checkpoint)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not made by Orthoformer") && err.contains("config.json"),
            "{err}"
        );
        // A folder another process of the same run is claiming holds only working files.
        let racing = scratch("racing");
        std::fs::create_dir_all(&racing).unwrap();
        for n in [".write-test", "..orthoformer.42.tmp", ".checkpoint.lock"] {
            std::fs::write(racing.join(n), b"").unwrap();
        }
        check(&racing, FolderKind::Checkpoint).unwrap();
        std::fs::remove_dir_all(&racing).unwrap();
        std::fs::write(foreign.join("state.json"), b"{}").unwrap();
        check(&foreign, FolderKind::Checkpoint).unwrap();
        std::fs::write(foreign.join(MARKER), b"junk").unwrap();
        assert!(check(&foreign, FolderKind::Checkpoint).is_err());
        for d in [d, foreign] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
