//! [`FileSet`]: one write of a set, from staging to the finished commit (the protocol is in the
//! module doc of `io::file_set`).

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{
    check_name, check_tag, malformed, move_into_place, record_path, record_text, record_tmp_path,
    recover, remove_staging, staged_prefix, sync_dir,
};
use crate::{Error, Result};

/// Capacity of the buffer between a writer and a staged file. Large tensors bypass it (they
/// are written from their own memory), so a checkpoint never holds a copy of itself.
pub const WRITE_BUFFER: usize = 1 << 16;

/// Where a write is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before the commit point: dropping undoes everything.
    Staging,
    /// The record is in place: the new set wins, and the next recovery finishes it.
    Committed,
    /// Finished.
    Done,
}

/// One step of a commit, in order (tests stop after any of them to simulate a crash).
#[derive(Clone, Copy, Debug)]
enum Step {
    WriteRecord,
    SyncDir,
    Publish,
    Move(usize),
    RemoveRecord,
}

/// A new version of a set of files, staged in its folder and committed all at once.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("of-doc-set-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// use orthoformer::io::file_set::FileSet;
/// let mut set = FileSet::begin(&dir, "pair")?;
/// set.write_bytes("a.txt", b"first")?;
/// set.write_bytes("b.txt", b"second")?;
/// set.commit()?; // both files appear together
/// assert_eq!(std::fs::read(dir.join("b.txt"))?, b"second");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct FileSet {
    dir: PathBuf,
    tag: String,
    /// `(name, SHA-256 hex)` of each staged file, in staging order.
    files: Vec<(String, String)>,
    phase: Phase,
}

/// Passes writes through to `inner` and hashes what was written.
struct HashWriter<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for HashWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl FileSet {
    /// Starts a new version of the set `tag` in the existing folder `dir`, after recovering
    /// any earlier write of it.
    pub fn begin(dir: &Path, tag: &str) -> Result<FileSet> {
        check_tag(dir, tag)?;
        recover(dir, tag)?;
        Ok(FileSet {
            dir: dir.to_path_buf(),
            tag: tag.to_string(),
            files: Vec::new(),
            phase: Phase::Staging,
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `name` is staged (`.S.new.name`), for writers that need a path of their own;
    /// call [`FileSet::adopt`] once the file is written there.
    pub fn staged_path(&self, name: &str) -> Result<PathBuf> {
        check_name(&self.dir, name)?;
        Ok(self.dir.join(format!("{}{name}", staged_prefix(&self.tag))))
    }

    /// Stages the new `name`, written by `fill`; an error of `fill` names the target file.
    pub fn write(
        &mut self,
        name: &str,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        let path = self.staged_path(name)?;
        self.check_new(name)?;
        let target = self.dir.join(name);
        let fail = |e| Error::io(&target, e);
        let file = crate::io::safe_file::create_fresh(&path).map_err(fail)?;
        let mut w = HashWriter {
            inner: BufWriter::with_capacity(WRITE_BUFFER, file),
            hasher: Sha256::new(),
        };
        fill(&mut w).map_err(fail)?;
        w.flush().map_err(fail)?;
        let hash = w
            .hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let file = w.inner.into_inner().map_err(|e| fail(e.into_error()))?;
        file.sync_all().map_err(fail)?;
        self.files.push((name.to_string(), hash));
        Ok(())
    }

    /// Stages the new `name` with contents `bytes`.
    pub fn write_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        self.write(name, |w| w.write_all(bytes))
    }

    /// Adds `name`, already written at [`FileSet::staged_path`] by the caller: syncs and hashes it.
    pub fn adopt(&mut self, name: &str) -> Result<()> {
        let path = self.staged_path(name)?;
        self.check_new(name)?;
        let target = self.dir.join(name);
        let bytes = fs::read(&path).map_err(|e| Error::io(&target, e))?;
        File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io(&target, e))?;
        self.files
            .push((name.to_string(), super::sha256_hex(&bytes)));
        Ok(())
    }

    fn check_new(&self, name: &str) -> Result<()> {
        if self.files.iter().any(|(n, _)| n == name) {
            return Err(super::malformed(
                &self.dir,
                format!("{name} is staged twice in one file set"),
            ));
        }
        Ok(())
    }

    /// `(name, SHA-256 hex)` of every staged file, in staging order.
    pub fn files(&self) -> &[(String, String)] {
        &self.files
    }

    /// Replaces the files of the set with the staged ones, all at once (see the module doc).
    ///
    /// An error before the commit point leaves the old set, and the staged files are removed;
    /// after it (a rename failing, which is rare), the new set is committed and the next
    /// recovery of the folder finishes it.
    pub fn commit(mut self) -> Result<()> {
        self.commit_steps(usize::MAX).map(|_| ())
    }

    /// Runs the first `limit` steps of the commit; returns whether it finished. `limit` below
    /// the number of steps leaves the folder as a crash there would (tests).
    pub(crate) fn commit_steps(&mut self, limit: usize) -> Result<bool> {
        // A name a rename cannot replace (a folder there) is refused before the commit point:
        // a record committed then would name a move no recovery can ever finish.
        for (name, _) in &self.files {
            let target = self.dir.join(name);
            if fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
                return Err(malformed(
                    &target,
                    "is a folder where a file of the set goes: remove it and write again",
                ));
            }
        }
        let mut steps = vec![
            Step::WriteRecord,
            Step::SyncDir,
            Step::Publish,
            Step::SyncDir,
        ];
        steps.extend((0..self.files.len()).map(Step::Move));
        steps.extend([Step::SyncDir, Step::RemoveRecord, Step::SyncDir]);
        for (i, step) in steps.into_iter().enumerate() {
            if i == limit {
                return Ok(false);
            }
            self.apply(step)?;
        }
        self.phase = Phase::Done;
        Ok(true)
    }

    fn apply(&mut self, step: Step) -> Result<()> {
        let (dir, tag) = (&self.dir, &self.tag);
        match step {
            Step::WriteRecord => {
                let tmp = record_tmp_path(dir, tag);
                let text = record_text(&self.files);
                let write = || -> std::io::Result<()> {
                    let mut f = crate::io::safe_file::create_fresh(&tmp)?;
                    f.write_all(text.as_bytes())?;
                    f.sync_all()
                };
                write().map_err(|e| Error::io(&tmp, e))
            }
            Step::SyncDir => sync_dir(dir),
            Step::Publish => {
                let record = record_path(dir, tag);
                fs::rename(record_tmp_path(dir, tag), &record)
                    .map_err(|e| Error::io(&record, e))?;
                self.phase = Phase::Committed;
                Ok(())
            }
            Step::Move(i) => {
                let (name, sha256) = &self.files[i];
                move_into_place(dir, tag, name, sha256).map(|_| ())
            }
            Step::RemoveRecord => {
                let record = record_path(dir, tag);
                fs::remove_file(&record).map_err(|e| Error::io(&record, e))
            }
        }
    }
}

impl Drop for FileSet {
    /// A write abandoned before its commit point (an error, a panic) removes its staged files;
    /// a committed one is left for recovery to finish.
    fn drop(&mut self) {
        if self.phase == Phase::Staging {
            let _ = remove_staging(&self.dir, &self.tag);
        }
    }
}
