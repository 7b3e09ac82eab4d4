//! Atomic file writes: data goes to a temporary file beside the target, is flushed and synced,
//! then renamed over the target. A crash or an error midway leaves either the old file or
//! nothing, never half a file.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The temporary path used while writing `path`: same folder (so the rename is atomic),
/// name prefixed with `.` and suffixed with the process id and `.tmp`.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".to_string());
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(tmp),
        _ => PathBuf::from(tmp),
    }
}

/// Writes `path` atomically with a closure that fills a buffered writer.
///
/// On any error, from the closure or from the file system, the temporary file is removed and
/// `path` is left untouched.
pub fn write_atomic<F>(path: &Path, fill: F) -> Result<()>
where
    F: FnOnce(&mut BufWriter<File>) -> Result<()>,
{
    let tmp = temp_path(path);
    let result = (|| {
        let file = super::safe_file::create_fresh(&tmp).map_err(|e| Error::io(path, e))?;
        let mut w = BufWriter::new(file);
        fill(&mut w)?;
        w.flush().map_err(|e| Error::io(path, e))?;
        let file = w
            .into_inner()
            .map_err(|e| Error::io(path, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(path, e))?;
        fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |w| w.write_all(bytes).map_err(|e| Error::io(path, e)))
}

/// Removes the temporary copies of `dir/name` (`.NAME.PID.tmp`) left by writers that died
/// mid-write (killed, power lost). A copy whose process is still alive is kept: it may be
/// about to rename it into place.
pub(crate) fn remove_stale_temporaries(dir: &Path, name: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| temporary_pid(f, name))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !process_alive(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The process id in `file` if it is a temporary copy of `name` as [`temp_path`] names them
/// (`.NAME.PID.tmp`).
pub(crate) fn temporary_pid<'a>(file: &'a str, name: &str) -> Option<&'a str> {
    file.strip_prefix('.')
        .and_then(|r| r.strip_prefix(name))
        .and_then(|r| r.strip_prefix('.'))
        .and_then(|r| r.strip_suffix(".tmp"))
        .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a process with id `pid` exists (Unix: signal 0; elsewhere only this process is
/// known to be alive).
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: kill with signal 0 only checks that the process exists; nothing is sent.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("of-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let target = dir.join("x.bin");
        let r = write_atomic(&target, |_| {
            Err(Error::io("x", std::io::Error::other("boom")))
        });
        assert!(r.is_err());
        assert!(!target.exists());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        write_atomic_bytes(&target, b"ok").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"ok");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stale_temporaries_go_live_ones_stay() {
        let dir = std::env::temp_dir().join(format!("of-atomic-stale-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        // A reaped child's id is free (until reused, which this instant makes unlikely).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let mine = std::process::id();
        for n in [
            format!(".m.{dead}.tmp"),
            format!(".m.{mine}.tmp"),
            ".m.x.tmp".into(),
            ".n.1.tmp".into(),
        ] {
            fs::write(dir.join(n), b"").unwrap();
        }
        remove_stale_temporaries(&dir, "m");
        let mut left: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                format!(".m.{mine}.tmp"),
                ".m.x.tmp".into(),
                ".n.1.tmp".to_string()
            ]
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
