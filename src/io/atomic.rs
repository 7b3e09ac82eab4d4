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
}
