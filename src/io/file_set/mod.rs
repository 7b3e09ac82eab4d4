//! A set of files in one folder replaced all at once: after a crash (`kill -9`, power loss) or
//! a failed write (full disk) at any moment, the folder holds either every old file or every
//! new one, never a mix. Plain `rename` replaces one file atomically; this extends it to many.
//!
//! ## Protocol
//! A set has a tag `S` (letters, digits, `-`, `_`; e.g. `checkpoint`) and files `f1..fn` of one
//! folder. Writing new contents:
//! 1. **Recover** any earlier write of `S` (below).
//! 2. **Stage**: write each `fi` as `.S.new.fi`, flush and fsync it (hashing it on the way).
//! 3. **Commit**: write the commit record `.S.commit.tmp` (the line `orthoformer-file-set 1`,
//!    then `SHA256  NAME` per new file), fsync it and the folder, rename it to `.S.commit`,
//!    fsync the folder. That rename is the commit point.
//! 4. **Finish**: rename every `.S.new.fi` over `fi`, fsync the folder, remove `.S.commit`.
//!
//! ## The states on disk, and why each recovers
//! | state | on disk | recovery |
//! |---|---|---|
//! | clean | the old (or new) set only | nothing to do |
//! | staging | old set, some `.S.new.*` (any may be partial), maybe a partial `.S.commit.tmp` | **roll back**: remove them; no old file was touched before the commit point |
//! | committed | `.S.commit`; each named `fi` is either still `.S.new.fi` (complete: fsynced before the record existed) or already renamed (its hash is the record's) | **roll forward**: rename the rest, remove the record |
//! | finished | new set and `.S.commit` | remove the record |
//!
//! The record appears whole or not at all (written, synced, then renamed), each rename is atomic
//! (POSIX `rename(2)`; `MoveFileEx` with replace on Windows), and rolling forward is idempotent,
//! so a crash during recovery leaves one of these states again. The folder fsyncs order the
//! steps on disk for power loss (Unix; elsewhere directories cannot be synced). A write that
//! fails before the commit point removes its staged files at once ([`FileSet`]'s `Drop`).
//!
//! A whole new folder ([`write_folder`]) is built as `.NAME.new` beside its place (a set
//! inside it) and renamed into place: that rename is its commit point, and a crash leaves only
//! `.NAME.new`, which the next write of the folder removes.
//!
//! Readers that recover a folder another process may be writing (evaluating a checkpoint while
//! training continues) share the folder's [`SetLock`] with the writer, so a live write is
//! never mistaken for a crashed one.
//!
//! Before any of this, a command claims what it writes ([`claim_outputs`]): its outputs never replace,
//! sit inside or hold its inputs or each other, and each is locked ([`OutputLock`]) so a second
//! process writing the same output is refused at once.

mod io_check;
mod lock;
pub(crate) mod manifest;
mod out_lock;
mod staged;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_io;

pub use io_check::{Claim, Input, OutKind, Output, check_outputs, claim_outputs};
pub use lock::{LOCK_WAIT, SetLock};
pub use manifest::{hash_file, is_sha256_hex, manifest_text, parse_manifest, sha256_hex};
pub use out_lock::{OutputLock, lock_path};
pub use staged::{FileSet, WRITE_BUFFER};

use std::fs;
use std::path::{Path, PathBuf};

use super::FormatError;
use crate::{Error, Result};

/// First line of a commit record.
const RECORD_MAGIC: &str = "orthoformer-file-set 1";

/// What [`recover`] found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Nothing was pending.
    Clean,
    /// An uncommitted write was undone: this many temporary files were removed.
    RolledBack(usize),
    /// A committed write was finished: this many files were moved into place.
    RolledForward(usize),
}

/// `.S.new.` (the prefix of `S`'s staged files).
pub(crate) fn staged_prefix(tag: &str) -> String {
    format!(".{tag}.new.")
}

/// `.S.commit`, the commit record.
pub(crate) fn record_path(dir: &Path, tag: &str) -> PathBuf {
    dir.join(format!(".{tag}.commit"))
}

/// `.S.commit.tmp`, the record while it is written.
pub(crate) fn record_tmp_path(dir: &Path, tag: &str) -> PathBuf {
    dir.join(format!(".{tag}.commit.tmp"))
}

fn malformed(path: &Path, what: impl Into<String>) -> Error {
    FormatError::Malformed {
        path: path.display().to_string(),
        what: what.into(),
    }
    .into()
}

/// Checks a set's tag: non-empty ASCII letters, digits, `-`, `_`.
pub(crate) fn check_tag(dir: &Path, tag: &str) -> Result<()> {
    let ok = !tag.is_empty()
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(malformed(dir, format!("{tag:?} is not a file-set tag")))
    }
}

/// Checks a file name of a set: one component, not hidden, one line.
pub(crate) fn check_name(dir: &Path, name: &str) -> Result<()> {
    let ok =
        !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\', '\n', '\r', '\0']);
    if ok {
        Ok(())
    } else {
        Err(malformed(dir, format!("{name:?} is not a plain file name")))
    }
}

/// Fsyncs a folder, so renames and removals in it are on disk (Unix; a no-op elsewhere, and
/// where the file system does not support it).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let synced = fs::File::open(dir).and_then(|f| f.sync_all());
        if let Err(e) = synced
            && !matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported
            )
        {
            return Err(Error::io(dir, e));
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Names of the entries of `dir` that start with `prefix`.
fn entries_with_prefix(dir: &Path, prefix: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if let Some(name) = entry.file_name().to_str()
            && name.starts_with(prefix)
        {
            out.push(name.to_string());
        }
    }
    out.sort();
    Ok(out)
}

/// Parses a commit record: the magic line, then the new files as a manifest
/// (`SHA256  NAME` per line).
pub(crate) fn parse_record(path: &Path, text: &str) -> Result<Vec<(String, String)>> {
    match text.split_once('\n') {
        Some((RECORD_MAGIC, files)) => manifest::parse_manifest(path, files),
        _ => Err(malformed(
            path,
            format!(
                "the commit record does not start with {RECORD_MAGIC:?}; remove it to keep the \
                 files as they are"
            ),
        )),
    }
}

/// The text of a commit record of `files` (`(name, SHA-256 hex)`).
pub(crate) fn record_text(files: &[(String, String)]) -> String {
    format!("{RECORD_MAGIC}\n{}", manifest::manifest_text(files))
}

/// Moves a committed file into place: `.S.new.name` over `name`. Already moved (no staged
/// file, the target present with the committed hash `sha256`) is fine: rolling forward is
/// idempotent, and verified.
pub(crate) fn move_into_place(dir: &Path, tag: &str, name: &str, sha256: &str) -> Result<bool> {
    let staged = dir.join(format!("{}{name}", staged_prefix(tag)));
    let target = dir.join(name);
    match fs::rename(&staged, &target) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if manifest::hash_file(&target).is_ok_and(|h| h == sha256) {
                Ok(false)
            } else {
                Err(malformed(
                    &record_path(dir, tag),
                    format!("the committed file {name} is neither staged nor in place"),
                ))
            }
        }
        Err(e) => Err(Error::io(&target, e)),
    }
}

/// Brings the set `tag` in `dir` to a clean state (see the module doc): a committed write is
/// finished, an uncommitted one undone. The caller holds the folder's [`SetLock`] when other
/// processes may be writing the same set.
pub fn recover(dir: &Path, tag: &str) -> Result<Recovery> {
    check_tag(dir, tag)?;
    let record = record_path(dir, tag);
    let mut moved = None;
    match read_record(dir, tag) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes)
                .map_err(|_| malformed(&record, "the commit record is not text"))?;
            let mut n = 0;
            for (name, sha256) in parse_record(&record, &text)? {
                n += usize::from(move_into_place(dir, tag, &name, &sha256)?);
            }
            sync_dir(dir)?;
            fs::remove_file(&record).map_err(|e| Error::io(&record, e))?;
            moved = Some(n);
        }
        Err(None) => {}
        Err(Some(e)) => return Err(e),
    }
    let removed = remove_staging(dir, tag)?;
    if moved.is_some() || removed > 0 {
        sync_dir(dir)?;
    }
    Ok(match moved {
        Some(n) => Recovery::RolledForward(n),
        None if removed > 0 => Recovery::RolledBack(removed),
        None => Recovery::Clean,
    })
}

/// The bytes of `S`'s commit record: `Err(None)` when there is none; a record that is not a
/// regular file inside the folder (a planted link or FIFO) is an error, never followed.
fn read_record(dir: &Path, tag: &str) -> std::result::Result<Vec<u8>, Option<Error>> {
    let record = record_path(dir, tag);
    match fs::symlink_metadata(&record) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(None),
        Err(e) => Err(Some(Error::io(&record, e))),
        Ok(m) if !m.is_file() => Err(Some(malformed(
            &record,
            "the commit record is not a regular file (a link or a special file): remove it",
        ))),
        Ok(_) => super::safe_file::read_regular(&record).map_err(Some),
    }
}

/// Removes `.S.new.*` and `.S.commit.tmp`; returns how many files were removed.
pub(crate) fn remove_staging(dir: &Path, tag: &str) -> Result<usize> {
    let mut names = entries_with_prefix(dir, &staged_prefix(tag))?;
    let tmp = record_tmp_path(dir, tag);
    if fs::symlink_metadata(&tmp).is_ok() {
        names.push(format!(".{tag}.commit.tmp"));
    }
    for n in &names {
        let p = dir.join(n);
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&p, e)),
        }
    }
    Ok(names.len())
}

/// Tags with something pending in `dir` (a record, a staged file or a record being written).
pub fn pending_tags(dir: &Path) -> Result<Vec<String>> {
    let mut tags = Vec::new();
    for name in entries_with_prefix(dir, ".")? {
        let rest = &name[1..];
        let Some((tag, kind)) = rest.split_once('.') else {
            continue;
        };
        let pending = kind == "commit" || kind == "commit.tmp" || kind.starts_with("new.");
        if pending && check_tag(dir, tag).is_ok() && !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_string());
        }
    }
    Ok(tags)
}

/// Recovers the sets pending in `path`'s folder that involve `path` (a commit record naming
/// it, or a staged copy of it), each under its [`SetLock`] when the folder has one, so that
/// reading `path` next sees a whole set. Writes nothing when nothing is pending.
pub fn recover_for(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    if !dir.is_dir() {
        return Ok(());
    }
    for tag in pending_tags(dir)? {
        let staged = dir.join(format!("{}{name}", staged_prefix(&tag)));
        let named = read_record(dir, &tag).is_ok_and(|bytes| {
            String::from_utf8_lossy(&bytes)
                .lines()
                .skip(1)
                .any(|l| l.split_once("  ").is_some_and(|(_, n)| n == name))
        });
        if named || fs::symlink_metadata(&staged).is_ok() {
            let _lock = SetLock::acquire_existing(dir, &tag)?;
            recover(dir, &tag)?;
        }
    }
    Ok(())
}

/// Writes a whole folder as a set. A folder that exists has `names` replaced as a set
/// ([`FileSet`] with `tag`). A new folder is staged beside it as `.NAME.new` (any earlier one is
/// removed first) and renamed into place when complete, so it appears whole or not at all.
pub fn write_folder(
    dir: &Path,
    tag: &str,
    fill: impl FnOnce(&mut FileSet) -> Result<()>,
) -> Result<()> {
    if dir.is_dir() {
        let mut set = FileSet::begin(dir, tag)?;
        fill(&mut set)?;
        return set.commit();
    }
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| malformed(dir, "the output folder has no name"))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let staging = parent.join(format!(".{name}.new"));
    // Not `exists()`: a planted link there (dangling or not) is removed, never followed.
    match fs::symlink_metadata(&staging) {
        Ok(m) if m.is_dir() => {
            fs::remove_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        }
        Ok(_) => fs::remove_file(&staging).map_err(|e| Error::io(&staging, e))?,
        Err(_) => {}
    }
    fs::create_dir(&staging).map_err(|e| Error::io(&staging, e))?;
    let built = (|| {
        let mut set = FileSet::begin(&staging, tag)?;
        fill(&mut set)?;
        set.commit()?;
        fs::rename(&staging, dir).map_err(|e| Error::io(dir, e))?;
        sync_dir(&parent)
    })();
    if built.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    built
}
