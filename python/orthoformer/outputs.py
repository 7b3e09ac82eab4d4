"""Where the package's writers may write: the one check every Python writer makes before it
writes (``prepare --out``, ``GPT.to_hf``/``Llama.to_hf``, ``train --out``), as the library's
``io::folder_kind`` and file sets do for the command line.

- **Identity and containment** (:func:`check_apart`): an output is never one of the command's
  inputs, never holds one, and never lies inside an input folder (a later run would read the
  outputs as input). Paths are compared resolved (links followed, ``..`` removed) and by
  device and inode, never as strings, so ``./a``, ``a/../a``, a link to ``a`` and a bind mount
  of ``a`` are all ``a``.
- **Kind** (:func:`output_folder`): an existing output folder is rewritten only when it is
  empty or a previous output of the same kind (the library's ``.orthoformer`` marker, or a
  signature the caller checks); a training checkpoint, another kind's folder or another
  program's non-empty folder is refused by name, before any work.
- **Sets**: the files are written through a :class:`~orthoformer.file_set.FileSet` (staged,
  then replaced together; links in a target's place refused, never followed).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Optional

from .file_set import FileSet
from .validate import InputError, text

#: The library's folder marker (``io::folder_kind::MARKER``) and its first word.
MARKER, MAGIC = ".orthoformer", "orthoformer-folder"
#: Marker kinds in words (``FolderKind::describe``), for the refusal naming what is there.
KINDS = {
    "checkpoint": "a training checkpoint",
    "compare": "a comparison of attention variants",
    "hf-llama": "a Hugging Face Llama model",
    "hf-gpt2": "a Hugging Face GPT-2 model",
    "report": "reports and figures",
    "ladder": "a size ladder",
}


def _ident(path: Any) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def real(path: Any) -> pathlib.Path:
    """``path`` resolved: absolute, links followed (as far as they exist), no ``..``."""
    return pathlib.Path(os.path.realpath(os.fspath(path)))


def contains(folder: Any, path: Any) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it: each existing ancestor of the resolved
    ``path`` is compared with ``folder`` by device and inode, the rest by resolved path."""
    top = real(folder)
    ident = _ident(top)
    here = real(path)
    for up in (here, *here.parents):
        if up == top or (ident is not None and _ident(up) == ident):
            return True
    return False


def check_apart(out_flag: str, out: Any, inputs: Iterable[tuple[str, Any]]) -> None:
    """Refuses an output ``out`` that is an input, holds one, or lies inside an input folder;
    ``inputs`` are ``(flag, path)`` pairs (``None`` paths skipped)."""
    for flag, value in inputs:
        if value is None:
            continue
        if contains(out, value):
            same = _ident(out) is not None and _ident(out) == _ident(value)
            where = "is" if same or real(out) == real(value) else "lies inside"
            raise InputError(
                f"{flag} {value} {where} {out_flag} {out}: writing the output would replace or "
                f"mix with what is read; choose another {out_flag}"
            )
        if os.path.isdir(value) and contains(value, out):
            raise InputError(
                f"{out_flag} {out} lies inside {flag} {value}: a later run would read the outputs "
                f"as input; choose an {out_flag} outside it"
            )


def folder_kind(folder: pathlib.Path) -> Optional[str]:
    """The kind a folder's ``.orthoformer`` marker records (``None``: no marker); a marker
    that is a link, not a file or not one line of the library's form is refused by name."""
    marker = folder / MARKER
    if not os.path.lexists(marker):
        return None
    if os.path.islink(marker) or not marker.is_file():
        raise InputError(f"{marker}: not a regular file (a link?): remove it if the folder is yours")
    line = marker.read_bytes()[:200].decode("utf-8", "replace").strip()
    word, _, kind = line.partition(" ")
    if word != MAGIC or kind not in KINDS:
        raise InputError(
            f"{marker} is not an Orthoformer folder marker ({line[:60]!r}): remove it if the folder is yours"
        )
    return kind


def mark(folder: pathlib.Path, kind: str) -> None:
    """Writes ``folder``'s marker (staged and renamed: never through a link)."""
    if folder_kind(folder) == kind:
        return
    tmp = folder / f"{MARKER}.tmp"
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(f"{MAGIC} {kind}\n")
    os.replace(tmp, folder / MARKER)


def is_working_file(name: str) -> bool:
    """The library's and this package's own working files (marker copies, write probes, a
    set's lock, staged files, commit record), which do not make a folder foreign."""
    if name.startswith(".") and name.lstrip(".").startswith("orthoformer"):
        return True
    if name.startswith(".write-test"):
        return True
    tag, _, kind = name[1:].partition(".") if name.startswith(".") else ("", "", "")
    return bool(tag) and (kind == "lock" or kind.startswith("new.") or kind.startswith("commit"))


def _check_folder(
    flag: str, folder: pathlib.Path, what: str, kind: Optional[str], accepts: Callable[[pathlib.Path], bool]
) -> None:
    """An existing ``folder`` may take the output: empty, marked ``kind``, or (unmarked) one
    that ``accepts`` (a previous output of the same kind); otherwise refused by what it holds."""
    if not folder.is_dir():
        raise InputError(f"{flag} {folder}: is a file, not a folder: choose a folder for {what}")
    found = folder_kind(folder)
    if found is not None:
        if found == kind:
            return
        raise InputError(f"{flag} {folder}: holds {KINDS[found]}, not {what}: choose another folder")
    names = sorted(n for n in os.listdir(folder) if not is_working_file(n))
    if names and not accepts(folder):
        more = ", ..." if len(names) > 3 else ""
        raise InputError(
            f"{flag} {folder}: is not empty and not {what} (it holds {', '.join(names[:3])}{more}): "
            "choose a new or empty folder"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {folder}: cannot be written (permissions): choose another {flag}")


def _to_create(flag: str, path: pathlib.Path) -> list[pathlib.Path]:
    """The folders to create for ``path`` (outermost first); the nearest existing one must be a
    writable folder."""
    missing, up = [], path
    while not os.path.lexists(up) and up != up.parent:
        missing.append(up)
        up = up.parent
    if not up.is_dir():
        raise InputError(f"{flag} {path}: {up} is not a folder: choose another {flag}")
    if not os.access(up, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: cannot write in {up} (permissions): choose another {flag}")
    return missing[::-1]


@contextlib.contextmanager
def output_folder(
    flag: str,
    value: Any,
    *,
    what: str,
    tag: str,
    names: Iterable[str],
    kind: Optional[str] = None,
    accepts: Callable[[pathlib.Path], bool] = lambda _: False,
    inputs: Iterable[tuple[str, Any]] = (),
) -> Iterator[FileSet]:
    """Claims the output folder ``value`` for the set ``names`` and yields its
    :class:`~orthoformer.file_set.FileSet`: every check first (:func:`check_apart` against
    ``inputs``, the folder's kind, links in the targets' places), then the folder is created
    and the set locked. Leaving by an exception removes the staged files and any folder made
    here (the old files stay); call ``commit()`` on the set to replace them. ``kind``: the
    marker written into a folder made or rewritten here (``None``: no marker)."""
    folder = pathlib.Path(text(flag, os.fspath(value)))
    if not str(value).strip():
        raise InputError(f"{flag} is empty: name a folder")
    check_apart(flag, folder, inputs)
    if os.path.lexists(folder) and not (os.path.islink(folder) and not folder.exists()):
        _check_folder(flag, folder, what, kind, accepts)
        created: list[pathlib.Path] = []
    elif os.path.islink(folder):
        raise InputError(f"{flag} {folder}: is a link to nothing: remove it or choose another {flag}")
    else:
        created = _to_create(flag, folder)
    for d in created:
        d.mkdir()
    marked, files = False, None
    try:
        with FileSet(folder, tag, names) as files:
            if kind is not None and folder_kind(folder) is None:
                mark(folder, kind)
                marked = True
            yield files
    except BaseException:
        if files is not None and files.committed:
            raise
        if marked:
            (folder / MARKER).unlink(missing_ok=True)
        for d in reversed(created):
            try:
                d.rmdir()  # only when empty: never anything another process put there
            except OSError:
                break
        raise


__all__ = [
    "KINDS",
    "MARKER",
    "check_apart",
    "contains",
    "folder_kind",
    "is_working_file",
    "mark",
    "output_folder",
    "real",
]
