//! [`SetLock`]: the advisory lock a writer and the readers of a file set share (`.S.lock`, an
//! empty file that stays in the folder), so that a reader's recovery never undoes the write
//! of a live process. The operating system releases it when its holder exits, even by
//! `kill -9`, so a crashed writer never leaves the folder locked.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::check_tag;
use crate::{Error, Result};

/// How long to wait for another process to release a lock before giving up.
pub const LOCK_WAIT: Duration = Duration::from_secs(120);

/// An exclusive lock on the set `S` of a folder (`.S.lock`), released on drop. Locks are per
/// open file: a process must not take the same set's lock twice.
#[derive(Debug)]
pub struct SetLock {
    _file: File,
}

impl SetLock {
    /// The lock file of the set `tag` in `dir`.
    pub fn path(dir: &Path, tag: &str) -> PathBuf {
        dir.join(format!(".{tag}.lock"))
    }

    /// Creates the lock file if needed and takes the lock, waiting up to [`LOCK_WAIT`] for
    /// another process to release it (writers).
    pub fn acquire(dir: &Path, tag: &str) -> Result<SetLock> {
        check_tag(dir, tag)?;
        let path = Self::path(dir, tag);
        // Never through a link: a planted `.S.lock` link must not create or open a file
        // elsewhere.
        let file = crate::io::safe_file::open_or_create_nofollow(&path)
            .map_err(|e| Error::io(&path, e))?;
        Self::wait_for(file, &path)
    }

    /// Takes the lock when the folder has a lock file, opening it read-only so a read-only
    /// folder can still be read (readers); `None` when there is none.
    pub fn acquire_existing(dir: &Path, tag: &str) -> Result<Option<SetLock>> {
        check_tag(dir, tag)?;
        let path = Self::path(dir, tag);
        match open_existing_nofollow(&path) {
            Ok(file) => Self::wait_for(file, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    fn wait_for(file: File, path: &Path) -> Result<SetLock> {
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(SetLock { _file: file }),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Error::io(
                        path,
                        std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "another process has held this lock for {} s (is another \
                                 orthoformer writing this folder?)",
                                LOCK_WAIT.as_secs()
                            ),
                        ),
                    ));
                }
                // Platforms or file systems without locks: go on unlocked.
                Err(std::fs::TryLockError::Error(e))
                    if e.kind() == std::io::ErrorKind::Unsupported =>
                {
                    return Ok(SetLock { _file: file });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(path, e)),
            }
        }
    }
}

/// Opens an existing lock file read-only, without following a link and without blocking on a
/// special file; anything but a regular file is an error.
fn open_existing_nofollow(path: &Path) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the lock is not a regular file: remove it",
        ));
    }
    Ok(file)
}
