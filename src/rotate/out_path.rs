//! Checking an output path of `rotate` and `quantize` before any work: a bad `out` found after
//! a minute of GPTQ wastes the minute, and an `out` that is the model itself (or a folder
//! holding it) would replace the source with its own rotation.

use std::path::{Path, PathBuf};

use super::RotateError;

/// What an output is on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutKind {
    /// One file (a `.gguf`).
    File,
    /// A folder (a Hugging Face model).
    Folder,
}

fn refuse(out: &Path, why: String) -> crate::Error {
    RotateError::Invalid(format!("`out` {}: {why}", out.display())).into()
}

/// The folder `out` is written in (`.` for a bare name).
pub(crate) fn parent_of(out: &Path) -> PathBuf {
    match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Refuses an `out` that cannot be written as `kind`, or whose writing would replace `model`:
/// its folder must exist or be creatable (the nearest existing one a folder), it must not be a link, nor a folder where a file is written (or the
/// reverse), nor the model or a folder holding it. Reads only metadata, so it runs before the
/// model is loaded.
pub fn check_out(out: &Path, model: &Path, kind: OutKind) -> crate::Result<()> {
    let Some(name) = out.file_name() else {
        return Err(refuse(
            out,
            "names no file or folder; give a path ending in a name".into(),
        ));
    };
    let parent = parent_of(out);
    // Missing folders are made when the output is written (as `train --out` makes them); the
    // nearest one that exists must be a folder.
    let mut existing = parent.as_path();
    while std::fs::symlink_metadata(existing).is_err() {
        match existing.parent() {
            Some(p) if !p.as_os_str().is_empty() => existing = p,
            _ => {
                existing = Path::new(".");
                break;
            }
        }
    }
    if !existing.is_dir() {
        return Err(refuse(
            out,
            format!(
                "{} is not a folder, so {} cannot be made there; give another path",
                existing.display(),
                parent.display()
            ),
        ));
    }
    if let Ok(m) = std::fs::symlink_metadata(out) {
        if m.file_type().is_symlink() {
            return Err(refuse(
                out,
                "is a link, which is never written through; give a path that is not one".into(),
            ));
        }
        match kind {
            OutKind::File if m.is_dir() => {
                return Err(refuse(
                    out,
                    "is a folder; a .gguf output is one file".into(),
                ));
            }
            OutKind::Folder if !m.is_dir() => {
                return Err(refuse(
                    out,
                    "is a file; a Hugging Face output is a folder (or name it *.gguf)".into(),
                ));
            }
            _ => {}
        }
    }
    // Compared resolved, so `./m.gguf`, `m.gguf` and a link to it are all the same model. A
    // model that does not resolve is reported by its loading.
    if let (Ok(model_at), Ok(parent_at)) = (model.canonicalize(), parent.canonicalize()) {
        let out_at = parent_at.join(name);
        if out_at == model_at {
            return Err(refuse(
                out,
                format!(
                    "is the `model` {} itself and would replace it; give another path",
                    model.display()
                ),
            ));
        }
        if model_at.starts_with(&out_at) {
            return Err(refuse(
                out,
                format!(
                    "holds the `model` {} and would replace it; give another path",
                    model.display()
                ),
            ));
        }
    }
    Ok(())
}
