//! Opening files as hostile input: every read takes regular files only, and every write inside
//! an output folder creates a fresh file without following links.
//!
//! Why: a folder a user downloads (a checkpoint, a Hugging Face model) or a folder the tool
//! writes into may hold planted symbolic links (to a file elsewhere, dangling to a path that
//! does not exist yet) and special files (a FIFO blocks a read forever, `/dev/zero` reads until
//! memory runs out). Reads open without blocking and check what they got; names inside a
//! folder must resolve inside it; writes use `O_CREAT | O_EXCL` (which never follows a link)
//! after removing whatever was at the temporary name.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

fn refused(path: &Path, what: String) -> Error {
    crate::io::FormatError::Malformed {
        path: path.display().to_string(),
        what,
    }
    .into()
}

/// What kind of entry `meta` describes, in words.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a folder"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading when it is a regular file (a link the caller gave is followed),
/// and refuses FIFOs, devices, sockets and folders without blocking on them.
pub fn open_regular(path: &Path) -> Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO's open blocks until a writer appears; non-blocking, it returns at once and
        // the check below refuses it. A regular file ignores the flag.
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(refused(
            path,
            format!(
                "is {}, not a regular file: give a regular file",
                kind_of(&meta)
            ),
        ));
    }
    Ok(file)
}

/// Reads a whole regular file (see [`open_regular`]).
pub fn read_regular(path: &Path) -> Result<Vec<u8>> {
    let mut file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    Ok(bytes)
}

/// Reads a whole regular file as UTF-8 text (see [`open_regular`]).
pub fn read_regular_text(path: &Path) -> Result<String> {
    into_text(path, read_regular(path)?)
}

/// `bytes`, read from `path`, as UTF-8 text.
pub fn into_text(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| refused(path, "is not UTF-8 text".to_string()))
}

/// Reads a whole regular file (see [`open_regular`]) of at most `max` bytes: a larger one (a
/// sparse giant, or not the file its name says) is refused by its size before it is read,
/// for files whose format bounds their size (settings, results).
pub fn read_regular_at_most(path: &Path, max: u64) -> Result<Vec<u8>> {
    let file = open_regular(path)?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let too_big = |len: u64| {
        refused(
            path,
            format!("is {len} bytes, more than the {max} such a file holds: give the right file"),
        )
    };
    if len > max {
        return Err(too_big(len));
    }
    let mut bytes = Vec::new();
    // A file that grows while it is read stops at the limit too.
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Reads `dir/name` as a regular file of at most `max` bytes that stays inside `dir`
/// ([`inside`], [`read_regular_at_most`]).
pub fn read_in_at_most(dir: &Path, name: &str, max: u64) -> Result<Vec<u8>> {
    read_regular_at_most(&inside(dir, name)?, max)
}

/// `dir/name`, checked to stay inside `dir`: a link there must resolve to a path inside the
/// folder (a link out of it, to `/etc/passwd` or to another user's file, is refused). A name
/// that does not exist is returned as is (the read that follows reports it).
pub fn inside(dir: &Path, name: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(path);
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::canonicalize(&path).map_err(|e| {
            refused(
                &path,
                format!(
                    "is a symbolic link that cannot be resolved ({e}): replace it with the file"
                ),
            )
        })?;
        let root = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
        if !target.starts_with(&root) {
            return Err(refused(
                &path,
                format!(
                    "is a symbolic link to {}, outside its folder: replace it with the file",
                    target.display()
                ),
            ));
        }
    }
    Ok(path)
}

/// Reads `dir/name` as a regular file that stays inside `dir` ([`inside`], [`open_regular`]).
pub fn read_in(dir: &Path, name: &str) -> Result<Vec<u8>> {
    read_regular(&inside(dir, name)?)
}

/// Reads `dir/name` as UTF-8 text that stays inside `dir`.
pub fn read_text_in(dir: &Path, name: &str) -> Result<String> {
    read_regular_text(&inside(dir, name)?)
}

/// Creates `path` as a new, empty regular file for writing, never through a link: whatever
/// is at `path` (a stale temporary file, a planted link, dangling or not) is removed first, and
/// the file is created with `O_CREAT | O_EXCL`, which fails rather than follow a link that
/// appears in between. For temporary and staged names only, which nothing else owns.
pub fn create_fresh(path: &Path) -> std::io::Result<File> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a folder is in the way of a temporary file: remove it",
            ));
        }
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW);
    }
    opts.open(path)
}

/// Opens (creating if needed) a file that stays in a folder, such as a lock file, without
/// following a link at its name: a link there is an error, never a write elsewhere.
pub fn open_or_create_nofollow(path: &Path) -> std::io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file: remove it",
        ));
    }
    Ok(file)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("of-safe-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn fifo_and_device_are_refused_without_blocking() {
        let d = scratch("fifo");
        let fifo = d.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_regular(&fifo).unwrap_err().to_string();
        assert!(err.contains("FIFO"), "{err}");
        let err = read_regular(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("device"), "{err}");
        let err = read_regular(&d).unwrap_err().to_string();
        assert!(err.contains("folder"), "{err}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn links_out_of_a_folder_are_refused_and_links_inside_kept() {
        let d = scratch("links");
        let outside = scratch("links-outside");
        std::fs::write(outside.join("secret"), b"x").unwrap();
        std::fs::write(d.join("real"), b"inside").unwrap();
        symlink(outside.join("secret"), d.join("out")).unwrap();
        symlink(d.join("real"), d.join("alias")).unwrap();
        symlink(d.join("missing"), d.join("dangling")).unwrap();
        assert!(
            read_in(&d, "out")
                .unwrap_err()
                .to_string()
                .contains("outside its folder")
        );
        assert_eq!(read_in(&d, "alias").unwrap(), b"inside");
        assert!(read_in(&d, "dangling").is_err());
        std::fs::remove_dir_all(&d).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn create_fresh_never_writes_through_a_link() {
        let d = scratch("create");
        let victim = d.join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        let planted = d.join(".tmp-name");
        symlink(&victim, &planted).unwrap();
        let dangling = d.join(".dangling");
        symlink(d.join("created-elsewhere"), &dangling).unwrap();
        use std::io::Write;
        create_fresh(&planted).unwrap().write_all(b"new").unwrap();
        create_fresh(&dangling).unwrap().write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        assert!(!d.join("created-elsewhere").exists());
        assert!(
            !std::fs::symlink_metadata(&planted)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        symlink(&victim, d.join(".lock")).unwrap();
        assert!(open_or_create_nofollow(&d.join(".lock")).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
