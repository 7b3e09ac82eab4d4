"""A set of files in one folder replaced all at once, in Python: the protocol of the library's
``src/io/file_set/`` (same names on disk, same commit record), so a crash or a failure at any
moment leaves the folder holding every old file or every new one, never a mix, and either
side recovers what the other left.

A set has a tag ``S`` and files ``f1..fn`` of one folder. :class:`FileSet` takes the set's
lock ``.S.lock`` (``flock``, released by the system even on SIGKILL), recovers an earlier
write, hands out staged paths ``.S.new.fi`` (fresh regular files, never through a link), and
:meth:`FileSet.commit` writes the record ``.S.commit`` (``orthoformer-file-set 1``, then
``SHA256  NAME`` per file; written, synced and renamed into place: the commit point), renames
each staged file over its target and removes the record. Before the commit point a failure
removes the staged files and the old set is untouched; after it, :func:`recover` (run by the
next writer, or a reader) finishes the renames.

This is not a general transaction: the targets must be plain files of the folder (a link or
a folder in a target's place is refused before anything is written, never followed or
replaced).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
from collections.abc import Iterable
from typing import Any

from .validate import InputError

#: First line of a commit record (the library's ``RECORD_MAGIC``).
RECORD_MAGIC = "orthoformer-file-set 1"
_TAG = re.compile(r"[A-Za-z0-9_-]+")


def _sync_dir(folder: pathlib.Path) -> None:
    """Renames and removals in ``folder`` on disk (where the file system can sync folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # a file system that cannot sync folders (the library ignores it too)
    finally:
        os.close(fd)


def sha256_file(path: pathlib.Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def check_targets(folder: pathlib.Path, names: Iterable[str]) -> None:
    """Each of ``names`` in ``folder`` is absent or a regular file: a link (to anywhere) or a
    folder planted in a target's place is refused by name before any work, never replaced."""
    for name in names:
        path = folder / name
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if not _regular(st):
            what = "a link" if os.path.islink(path) else "not a regular file"
            raise InputError(
                f"{path} is {what}: an output is written as a plain file of its folder and never "
                "through a link or over a folder; remove it or choose another output"
            )


def _regular(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode)


def _lock(folder: pathlib.Path, tag: str) -> int:
    """The set's exclusive lock ``.S.lock`` (created, never through a link)."""
    import fcntl

    path = folder / f".{tag}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise InputError(f"{path}: cannot open the lock ({e.strerror}): remove it if it is a link") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(
            f"{folder}: another process is writing it (lock {path.name}); wait for it or choose another"
        ) from None
    return fd


def _parse_record(record: pathlib.Path) -> list[tuple[str, str]]:
    text = record.read_text(encoding="utf-8", errors="replace")
    head, _, body = text.partition("\n")
    if head != RECORD_MAGIC:
        raise InputError(f"{record}: not a commit record (no {RECORD_MAGIC!r}); remove it to keep the files")
    files = []
    for i, line in enumerate(body.splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or not name or "/" in name or name.startswith("."):
            raise InputError(f"{record}: line {i} is not 'SHA256  NAME'; remove it to keep the files")
        files.append((name, digest))
    return files


def recover(folder: pathlib.Path, tag: str) -> None:
    """Brings the set ``tag`` in ``folder`` to a clean state: a committed write finished
    (staged files renamed into place, each checked against the record), an uncommitted one
    removed. The caller holds the set's lock."""
    record = folder / f".{tag}.commit"
    if os.path.lexists(record):
        if os.path.islink(record) or not record.is_file():
            raise InputError(f"{record}: the commit record is not a regular file (a link?): remove it")
        for name, digest in _parse_record(record):
            staged = folder / f".{tag}.new.{name}"
            if os.path.lexists(staged):
                os.replace(staged, folder / name)
            elif not (folder / name).is_file() or sha256_file(folder / name) != digest:
                raise InputError(f"{record}: the committed file {name} is neither staged nor in place")
        _sync_dir(folder)
        record.unlink()
    for leftover in folder.glob(f".{tag}.new.*"):
        leftover.unlink(missing_ok=True)
    (folder / f".{tag}.commit.tmp").unlink(missing_ok=True)
    _sync_dir(folder)


def pending(folder: pathlib.Path, tag: str) -> bool:
    """Whether ``folder`` holds a committed write of ``tag`` that is not finished."""
    return os.path.lexists(folder / f".{tag}.commit")


class FileSet:
    """The files ``names`` of ``folder`` (which exists) written as one set tagged ``tag``.
    Use as a context manager: leaving it by an exception removes the staged files (the old set
    stays as it was); :meth:`commit` replaces the set."""

    def __init__(self, folder: pathlib.Path, tag: str, names: Iterable[str]) -> None:
        if not _TAG.fullmatch(tag):
            raise ValueError(f"{tag!r} is not a file-set tag")
        self.folder, self.tag, self.names = pathlib.Path(folder), tag, list(names)
        for name in self.names:
            if not name or name.startswith(".") or "/" in name or "\n" in name:
                raise ValueError(f"{name!r} is not a plain file name")
        self._fd = _lock(self.folder, tag)
        self._done = False
        try:
            recover(self.folder, tag)
            check_targets(self.folder, self.names)
        except BaseException:
            self.close()
            raise

    def path(self, name: str) -> pathlib.Path:
        """Where to write ``name`` before the commit: a fresh empty regular file, created
        here (a planted link or a killed run's leftover is removed first, never followed), so
        a writer that opens it by path writes into the folder and nowhere else."""
        if name not in self.names:
            raise ValueError(f"{name!r} is not a file of this set")
        staged = self.folder / f".{self.tag}.new.{name}"
        staged.unlink(missing_ok=True)
        os.close(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
        return staged

    @property
    def committed(self) -> bool:
        """Whether :meth:`commit` passed its commit point."""
        return self._done

    def commit(self) -> None:
        """Replaces the set: every name must have been staged. The record is the commit
        point; the targets are checked again (a link planted meanwhile is refused)."""
        check_targets(self.folder, self.names)
        files = []
        for name in self.names:
            staged = self.folder / f".{self.tag}.new.{name}"
            if not staged.is_file() or staged.is_symlink():
                raise ValueError(f"{name} was not staged")
            with open(staged, "rb") as f:
                os.fsync(f.fileno())
            files.append((name, sha256_file(staged)))
        tmp = self.folder / f".{self.tag}.commit.tmp"
        tmp.unlink(missing_ok=True)
        text = RECORD_MAGIC + "\n" + "".join(f"{h}  {n}\n" for n, h in files)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        _sync_dir(self.folder)
        os.replace(tmp, self.folder / f".{self.tag}.commit")  # the commit point
        self._done = True
        recover(self.folder, self.tag)  # the renames, as a later reader would finish them

    def close(self) -> None:
        """Releases the lock; uncommitted staged files are removed."""
        if self._fd < 0:
            return
        try:
            if not self._done:
                for name in self.names:
                    (self.folder / f".{self.tag}.new.{name}").unlink(missing_ok=True)
                (self.folder / f".{self.tag}.commit.tmp").unlink(missing_ok=True)
            (self.folder / f".{self.tag}.lock").unlink(missing_ok=True)  # held: no one else has it
        finally:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileSet:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


__all__ = ["FileSet", "RECORD_MAGIC", "check_targets", "pending", "recover", "sha256_file"]
