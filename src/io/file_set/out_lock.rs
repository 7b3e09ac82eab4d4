//! [`OutputLock`]: one process writes an output at a time. Two `train --out X` (or two
//! `rotate --out X`) started together both passed every check and then raced: one run lost
//! with both exiting 0, or each removing the other's staged file. The lock is taken before any
//! work and never waited for: the second process is refused at once with one line naming the
//! process that holds it.
//!
//! The lock file sits beside the output, `.orthoformer-out.NAME.lock` in its folder (so a
//! folder that does not exist yet, or a single file, is locked the same way, and nothing is
//! added inside the output), and holds the holder's process id. It is an advisory lock
//! (`flock`; `LockFileEx` on Windows), released by the operating system when its holder exits,
//! even by `kill -9`; the holder removes the file when it is done. The name starts with
//! `.orthoformer`, so it never makes a folder look foreign (`io::folder_kind`).

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::io::FormatError;
use crate::{Error, Result};

/// An exclusive lock on one output, released and its file removed on drop.
#[derive(Debug)]
pub struct OutputLock {
    file: File,
    path: PathBuf,
}

/// The lock file of the output at `resolved` (a resolved path: see `io_check::resolve`).
pub fn lock_path(resolved: &Path) -> Option<PathBuf> {
    let name = resolved.file_name()?;
    let parent = resolved.parent()?;
    Some(parent.join(format!(".orthoformer-out.{}.lock", name.to_string_lossy())))
}

impl OutputLock {
    /// Takes the lock of the output at `resolved` (its folder is created if needed), or
    /// refuses at once when another process holds it; `shown` and `role` name the output in
    /// the message.
    pub fn try_acquire(resolved: &Path, shown: &Path, role: &str) -> Result<OutputLock> {
        let path = lock_path(resolved).ok_or_else(|| {
            Error::from(FormatError::Malformed {
                path: shown.display().to_string(),
                what: format!("`{role}` names no file or folder; give a path ending in a name"),
            })
        })?;
        // Making the lock file is the output's write test, before any work: a folder that
        // cannot be made or written is found now, not after a minute of GPTQ.
        let unwritable = |e: std::io::Error| -> Error {
            let folder = path.parent().unwrap_or(Path::new("."));
            FormatError::Malformed {
                path: shown.display().to_string(),
                what: format!(
                    "`{role}` cannot be written: {} takes no new file ({e}); give another path",
                    folder.display()
                ),
            }
            .into()
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(unwritable)?;
        }
        // A holder removes the file as it releases it: a lock taken on a file that is no
        // longer at the path is no lock, so take it again (a few rounds at most).
        for _ in 0..16 {
            let mut file =
                crate::io::safe_file::open_or_create_nofollow(&path).map_err(unwritable)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(in_use(&mut file, shown, role));
                }
                // File systems without locks: go on unlocked, as `SetLock` does.
                Err(std::fs::TryLockError::Error(e))
                    if e.kind() == std::io::ErrorKind::Unsupported =>
                {
                    return Ok(OutputLock { file, path });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&path, e)),
            }
            if !still_at(&file, &path) {
                continue;
            }
            let id = format!("{}\n", std::process::id());
            file.set_len(0)
                .and_then(|_| file.rewind())
                .and_then(|_| file.write_all(id.as_bytes()))
                .map_err(|e| Error::io(&path, e))?;
            return Ok(OutputLock { file, path });
        }
        Err(Error::io(
            &path,
            std::io::Error::other("the lock file keeps being replaced; try again"),
        ))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether `file` is still the file at `path` (not removed or replaced by a releasing holder).
fn still_at(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        true
    }
}

/// The refusal of an output another process holds, naming that process when its id is in
/// the lock file.
fn in_use(file: &mut File, shown: &Path, role: &str) -> Error {
    let mut text = String::new();
    let _ = file.take(32).read_to_string(&mut text);
    let holder = match text.trim().parse::<u32>() {
        Ok(pid) => format!("process {pid}"),
        Err(_) => "another process".to_string(),
    };
    FormatError::Malformed {
        path: shown.display().to_string(),
        what: format!(
            "`{role}` is in use by {holder} (another orthoformer writing it): wait for it to \
             finish, or give another path"
        ),
    }
    .into()
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // Removed while still held, so no one can take it between the release and the removal;
        // a waiter that opened the old file sees it gone and takes the lock again.
        #[cfg(unix)]
        if still_at(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
        let _ = self.file.unlock();
    }
}
