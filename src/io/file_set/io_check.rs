//! The one check every writer makes before any work: the outputs it writes never replace,
//! sit inside or hold the inputs it reads, nor each other, and each can be written as what it
//! is (a file or a folder). [`claim_outputs`] then takes each output's [`OutputLock`], so a second
//! process writing the same output is refused at once instead of both racing.
//!
//! Why here, in one place: `--out` equal to `--model`, `export --logits-out` onto the
//! checkpoint exported, or `--out` one `..` or one link away from the input each replaced a
//! source. Paths are compared resolved (links and `..` followed, relative paths made absolute)
//! and, where they exist, by device and inode, so two spellings of one file are one file (a
//! hard link, a bind mount). Only metadata is read, so it runs before a model is loaded or a
//! minute of GPTQ is spent.
//!
//! Roles are the library's field names (`model`, `out`, `logits_out`); each front end writes
//! them as its own flags (see [`crate::error::name_fields`]).

use std::path::{Component, Path, PathBuf};

use super::out_lock::OutputLock;
use crate::io::FormatError;
use crate::{Error, Result};

/// What an output is on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutKind {
    /// One file (a `.gguf`, a `.npy`), replaced by a rename.
    File,
    /// A folder (a checkpoint, a Hugging Face model, a work folder).
    Folder,
}

/// A path a command reads: a file or a folder, named by its field.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// The field that names it (`model`, `checkpoint`, `data`).
    pub role: &'a str,
    /// The path as given.
    pub path: &'a Path,
}

/// A path a command writes, named by its field.
#[derive(Clone, Copy, Debug)]
pub struct Output<'a> {
    /// The field that names it (`out`, `logits_out`, `work_dir`).
    pub role: &'a str,
    /// The path as given.
    pub path: &'a Path,
    /// A file or a folder.
    pub kind: OutKind,
}

impl<'a> Input<'a> {
    /// The input `path`, named `role`.
    pub fn new(role: &'a str, path: &'a Path) -> Self {
        Input { role, path }
    }
}

impl<'a> Output<'a> {
    /// The file output `path`, named `role`.
    pub fn file(role: &'a str, path: &'a Path) -> Self {
        Output {
            role,
            path,
            kind: OutKind::File,
        }
    }

    /// The folder output `path`, named `role`.
    pub fn folder(role: &'a str, path: &'a Path) -> Self {
        Output {
            role,
            path,
            kind: OutKind::Folder,
        }
    }
}

/// Every output's lock, held while the command writes; released (and the lock files
/// removed) on drop.
#[derive(Debug)]
pub struct Claim {
    _locks: Vec<OutputLock>,
}

/// A path resolved: absolute, links and `..` followed as far as it exists.
#[derive(Debug)]
pub(crate) struct Resolved {
    /// The resolved path (the nearest existing ancestor canonical, the rest appended).
    pub(crate) path: PathBuf,
    /// Device and inode of each existing ancestor, the path itself first when it exists.
    ids: Vec<(PathBuf, FileId)>,
}

/// Device and inode (Unix); elsewhere the canonical path stands in for it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum FileId {
    #[cfg(unix)]
    Inode(u64, u64),
    #[cfg(not(unix))]
    Path(PathBuf),
}

fn file_id(path: &Path, meta: &std::fs::Metadata) -> FileId {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = path;
        FileId::Inode(meta.dev(), meta.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        FileId::Path(path.to_path_buf())
    }
}

fn refuse(path: &Path, role: &str, why: String) -> Error {
    FormatError::Malformed {
        path: path.display().to_string(),
        what: format!("`{role}` {why}"),
    }
    .into()
}

/// Resolves `path` (see [`Resolved`]). A part that does not exist may not be followed by `..`
/// (it could not be walked), and the nearest existing ancestor must be a folder.
pub(crate) fn resolve(path: &Path, role: &str) -> Result<Resolved> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::io(path, e))?
            .join(path)
    };
    // The longest prefix that exists (`symlink_metadata`: a dangling link exists as a link).
    let mut existing = abs.as_path();
    let mut rest: Vec<Component<'_>> = Vec::new();
    while std::fs::symlink_metadata(existing).is_err() {
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => break,
        }
    }
    rest.reverse();
    if rest
        .iter()
        .any(|c| !matches!(c, Component::Normal(_)) || c.as_os_str().is_empty())
    {
        return Err(refuse(
            path,
            role,
            "goes through a folder that does not exist with `..` or `.`; give a plain path".into(),
        ));
    }
    let base = existing.canonicalize().map_err(|e| {
        refuse(
            path,
            role,
            format!(
                "cannot be resolved ({}: {e}); give a path that leads somewhere",
                existing.display()
            ),
        )
    })?;
    if !rest.is_empty() && !base.is_dir() {
        return Err(refuse(
            path,
            role,
            format!(
                "cannot be made: {} is not a folder; give another path",
                base.display()
            ),
        ));
    }
    let resolved: PathBuf = rest.iter().fold(base.clone(), |p, c| p.join(c));
    let ids = base
        .ancestors()
        .filter_map(|a| {
            std::fs::metadata(a)
                .ok()
                .map(|m| (a.to_path_buf(), file_id(a, &m)))
        })
        .collect();
    Ok(Resolved {
        path: resolved,
        ids,
    })
}

impl Resolved {
    /// The id of the path itself, when it exists.
    fn own_id(&self) -> Option<&FileId> {
        self.ids
            .first()
            .filter(|(p, _)| *p == self.path)
            .map(|(_, id)| id)
    }

    /// Whether this path is `other` itself (same file or folder).
    fn same_as(&self, other: &Resolved) -> bool {
        match (self.own_id(), other.own_id()) {
            (Some(a), Some(b)) => a == b,
            _ => self.path == other.path,
        }
    }

    /// Whether this path lies strictly inside the folder `other`.
    fn inside(&self, other: &Resolved) -> bool {
        if self.path != other.path && self.path.starts_with(&other.path) {
            return true;
        }
        let Some(theirs) = other.own_id() else {
            return false;
        };
        self.ids
            .iter()
            .any(|(p, id)| id == theirs && *p != self.path)
    }
}

/// Checks one output's own path: not a link (a file output would replace the link, a folder
/// output would be written elsewhere than it reads), and of the kind it is written as.
fn check_own(o: &Output<'_>) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(o.path) else {
        return Ok(());
    };
    if meta.file_type().is_symlink() {
        return Err(refuse(
            o.path,
            o.role,
            "is a link, which is never written through; give a path that is not one".into(),
        ));
    }
    match o.kind {
        OutKind::File if meta.is_dir() => Err(refuse(
            o.path,
            o.role,
            "is a folder, but a file is written there; give a file path".into(),
        )),
        OutKind::Folder if !meta.is_dir() => Err(refuse(
            o.path,
            o.role,
            "is a file, but a folder is written there; give a folder path".into(),
        )),
        _ => Ok(()),
    }
}

/// Refuses any output that is, lies inside or holds one of `inputs` or another output, or
/// cannot be written as its kind (see the module doc). Reads metadata only. An input that does
/// not exist is left for its reader to report.
pub fn check_outputs(inputs: &[Input<'_>], outputs: &[Output<'_>]) -> Result<()> {
    let ins: Vec<(&Input<'_>, Resolved)> = inputs
        .iter()
        .filter(|i| std::fs::symlink_metadata(i.path).is_ok())
        .map(|i| resolve(i.path, i.role).map(|r| (i, r)))
        .collect::<Result<_>>()?;
    let mut outs: Vec<(&Output<'_>, Resolved)> = Vec::with_capacity(outputs.len());
    for o in outputs {
        if o.path.as_os_str().is_empty() {
            return Err(refuse(o.path, o.role, "is empty; give a path".into()));
        }
        check_own(o)?;
        let r = resolve(o.path, o.role)?;
        if r.path.parent().is_none() {
            return Err(refuse(
                o.path,
                o.role,
                "is the root folder; give a path with a name".into(),
            ));
        }
        for (i, ir) in &ins {
            let (what, shown) = (i.role, i.path.display());
            let why = if r.same_as(ir) {
                format!("is the `{what}` {shown} itself and would replace it")
            } else if r.inside(ir) {
                format!("is inside the `{what}` folder {shown} and would write into it")
            } else if ir.inside(&r) {
                format!("holds the `{what}` {shown} and would replace it")
            } else {
                continue;
            };
            return Err(refuse(o.path, o.role, format!("{why}; give another path")));
        }
        for (p, pr) in &outs {
            let shown = p.path.display();
            let why = if r.same_as(pr) {
                format!(
                    "is also given as `{}` {shown}; give each output once",
                    p.role
                )
            } else if r.inside(pr) || pr.inside(&r) {
                format!(
                    "and `{}` {shown} lie one inside the other; give separate paths",
                    p.role
                )
            } else {
                continue;
            };
            return Err(refuse(o.path, o.role, why));
        }
        outs.push((o, r));
    }
    Ok(())
}

/// [`check_outputs`], then each output's [`OutputLock`], taken at once or refused with the process
/// that holds it: a command claims everything it will write before it starts working, and
/// holds the [`Claim`] until it has written.
pub fn claim_outputs(inputs: &[Input<'_>], outputs: &[Output<'_>]) -> Result<Claim> {
    check_outputs(inputs, outputs)?;
    let mut locks = Vec::with_capacity(outputs.len());
    for o in outputs {
        let r = resolve(o.path, o.role)?;
        locks.push(OutputLock::try_acquire(&r.path, o.path, o.role)?);
    }
    Ok(Claim { _locks: locks })
}
