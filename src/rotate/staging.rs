//! An output written beside its place and moved there only once it passed its check: a
//! rotation or quantisation whose check fails (or errs) leaves the previous output as it was
//! and nothing of its own behind.
//!
//! The staged copy is `.NAME.staged` in `out`'s folder (same file system, so the move is a
//! rename). A file is committed by one atomic rename over `out`. A folder is renamed into
//! place when `out` does not exist; into an existing folder its files are moved as one file
//! set ([`FileSet`], tag `hf-export`, as [`crate::export::llama::save_hf_folder`] writes), so
//! the folder holds every old file or every new one, never a mix. Dropping an uncommitted
//! [`Staged`] removes the copy.

use std::fs;
use std::path::{Path, PathBuf};

use super::out_path::parent_of;
use crate::io::file_set::FileSet;
use crate::io::folder_kind::{self, FolderKind};
use crate::{Error, Result};

/// A staged output: written at [`Staged::path`], moved to its place by [`Staged::commit`],
/// removed if dropped before.
#[derive(Debug)]
pub struct Staged {
    out: PathBuf,
    path: PathBuf,
    committed: bool,
}

/// Removes whatever is at `p` (a file, a link or a folder), never following a link.
fn remove_any(p: &Path) -> Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p).map_err(|e| Error::io(p, e)),
        Ok(_) => fs::remove_file(p).map_err(|e| Error::io(p, e)),
        Err(_) => Ok(()),
    }
}

impl Staged {
    /// Stages `out`: its copy is `.NAME.staged` beside it (any left by a crash is removed).
    /// Write the output at [`Staged::path`], check it, then [`Staged::commit`].
    pub fn new(out: &Path) -> Result<Staged> {
        let name = out
            .file_name()
            .ok_or_else(|| Error::io(out, std::io::Error::other("the output has no name")))?;
        let parent = parent_of(out);
        fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
        let path = parent.join(format!(".{}.staged", name.to_string_lossy()));
        remove_any(&path)?;
        Ok(Staged {
            out: out.to_path_buf(),
            path,
            committed: false,
        })
    }

    /// Where the output is written before its check.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the checked output into place (see the module doc).
    pub fn commit(mut self) -> Result<()> {
        let existing_folder = fs::symlink_metadata(&self.out).is_ok_and(|m| m.is_dir());
        if self.path.is_dir() && existing_folder {
            self.commit_into_folder()?;
            remove_any(&self.path)?;
        } else {
            fs::rename(&self.path, &self.out).map_err(|e| Error::io(&self.out, e))?;
            crate::io::file_set::sync_dir(&parent_of(&self.out))?;
        }
        self.committed = true;
        Ok(())
    }

    /// Moves the staged folder's files into the existing `out` as one set.
    fn commit_into_folder(&self) -> Result<()> {
        folder_kind::check(&self.out, FolderKind::HfLlama)?;
        let mut set = FileSet::begin(&self.out, "hf-export")?;
        let entries = fs::read_dir(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let mut names: Vec<String> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&self.path, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // Hidden names are the staged folder's own working files (its marker, its set's
            // records), not the model's.
            if !name.starts_with('.') && entry.file_type().is_ok_and(|t| t.is_file()) {
                names.push(name);
            }
        }
        names.sort();
        for name in &names {
            let from = self.path.join(name);
            let to = set.staged_path(name)?;
            fs::rename(&from, &to).map_err(|e| Error::io(&from, e))?;
            set.adopt(name)?;
        }
        folder_kind::mark(&self.out, FolderKind::HfLlama)?;
        set.commit()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: a copy that cannot be removed is removed by the next `new`.
            let _ = remove_any(&self.path);
        }
    }
}
