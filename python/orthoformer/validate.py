"""The package's one validation layer: every option a user passes and every field read from a
file (``meta.json``, ``config.json``, markers, ``state_dict`` buffers) goes through these
checks before anything is built or written. A failure is an :class:`InputError` (a
``ValueError``) whose message is one line naming the field, what was wrong and what to do;
``python -m orthoformer.*`` prints it and exits with status 2, as the command line does.

The checks are strict where a silent reading would change the model: an integer field takes
an ``int`` (or a NumPy/torch integer scalar), never ``True``, ``4.0`` or ``"4"``; a number is
finite unless said otherwise; a seed is an integer in the library's range ``0 .. 2**64 - 1``.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, Optional

#: The library's seeds are u64.
SEED_MAX = 2**64 - 1


class InputError(ValueError):
    """A bad option or file field: one line naming it and saying what to do."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _as_int(value: Any) -> Optional[int]:
    """``value`` as a Python int when it is an integer scalar (not a bool, not a float)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    # 0-d integer tensors and NumPy arrays (a state_dict buffer) without importing torch.
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None and tuple(shape) == ():
        name = str(dtype)
        if "int" in name and "bool" not in name:
            return int(value.item() if hasattr(value, "item") else value)
    return None


def integer(
    name: str, value: Any, *, lo: Optional[int] = None, hi: Optional[int] = None, hint: str = ""
) -> int:
    """``value`` as an int in ``[lo, hi]`` (either bound optional), or an :class:`InputError`
    naming ``name``."""
    v = _as_int(value)
    if v is None:
        raise InputError(f"{name} must be an integer, got {_show(value)}{_hint(hint)}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise InputError(f"{name} must be {_range(lo, hi)}, got {v}{_hint(hint)}")
    return v


def number(
    name: str,
    value: Any,
    *,
    lo: Optional[float] = None,
    hi: Optional[float] = None,
    lo_open: bool = False,
    hi_open: bool = False,
    hint: str = "",
    what: str = "",
) -> float:
    """``value`` as a finite float in the range (bounds closed unless ``*_open``), or an
    :class:`InputError` naming ``name`` (``what`` says the range in words: the library's
    own message for the same option)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be a number, got {_show(value)}{_hint(hint)}")
    v = float(value)
    if not math.isfinite(v):
        raise InputError(f"{name} must be a finite number, got {v}{_hint(hint)}")
    bad_lo = lo is not None and (v <= lo if lo_open else v < lo)
    bad_hi = hi is not None and (v >= hi if hi_open else v > hi)
    if bad_lo or bad_hi:
        left = "" if lo is None else ("> " if lo_open else ">= ") + f"{lo:g}"
        right = "" if hi is None else ("< " if hi_open else "<= ") + f"{hi:g}"
        bounds = what or " and ".join(b for b in (left, right) if b)
        raise InputError(f"{name} must be {bounds}, got {v:g}{_hint(hint)}")
    return v


def seed(name: str, value: Any) -> int:
    """A seed: an integer in ``0 .. 2**64 - 1`` (the library's u64)."""
    return integer(name, value, lo=0, hi=SEED_MAX, hint="seeds are integers from 0 to 2**64 - 1")


def choice(name: str, value: Any, options: Iterable[str]) -> str:
    """``value`` when it is one of ``options`` (strings)."""
    opts = list(options)
    if not isinstance(value, str) or value not in opts:
        raise InputError(f"{name} must be one of {', '.join(opts)}, got {_show(value)}")
    return value


def text(name: str, value: Any) -> str:
    """A string field."""
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {_show(value)}")
    return value


def mapping(name: str, value: Any) -> Mapping[str, Any]:
    """A JSON object."""
    if not isinstance(value, Mapping):
        raise InputError(f"{name} must be a JSON object, got {_show(value)}")
    return value


def field(fields: Mapping[str, Any], key: str, where: str) -> Any:
    """``fields[key]``, or an :class:`InputError` saying that ``where`` lacks it."""
    if key not in fields:
        raise InputError(
            f"{where} has no {key!r}: write it (or recreate the file with the tool that made it)"
        )
    return fields[key]


def one_line(message: Any) -> str:
    """``message`` on one line: a dependency's multi-line error (tokenizers, JSON) joined with
    ``; `` so that ``error: ...`` stays the single line scripts and the tests read."""
    return "; ".join(part.strip() for part in str(message).splitlines() if part.strip())


def safetensors_file(path: Any, framework: str = "numpy") -> dict[str, Any]:
    """Every tensor of the safetensors file ``path`` (``framework``: ``numpy`` or ``torch``).
    Whatever the ``safetensors`` library refuses (a truncated or corrupt file: its
    ``SafetensorError`` is neither a ``ValueError`` nor an ``OSError``) is one
    :class:`InputError` naming the file."""
    from safetensors import SafetensorError

    if framework == "torch":
        from safetensors.torch import load_file
    else:
        from safetensors.numpy import load_file
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise InputError(
            f"{path} is not a readable safetensors file ({one_line(e)}): write it again, or "
            "restore it from where it came"
        ) from None


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the package's error form: a bad or missing flag is an :class:`InputError`
    (``main`` prints one ``error:`` line and returns 2) instead of argparse's usage block on
    stderr and ``SystemExit``, which would print two lines and skip ``main``'s handler. A
    value refused by an :func:`int_flag`/:func:`number_flag` type reads ``--flag must be
    ...``, as the same check made later does."""

    def error(self, message: str) -> NoReturn:
        head, sep, rest = message.partition(": ")
        if sep and head.startswith("argument -") and rest.startswith("must be"):
            message = f"{head.removeprefix('argument ').split('/')[0]} {rest}"
        raise InputError(f"{one_line(message)}: see {self.prog} --help")


#: Largest count a flag takes unless it says otherwise: a ``u32`` (more steps, rows or
#: positions than any run this package can finish), so no count overflows the library's
#: integer types on its way in.
COUNT_MAX = 2**32 - 1


def int_flag(lo: Optional[int] = 0, hi: Optional[int] = COUNT_MAX, hint: str = "") -> Any:
    """An argparse ``type`` for an integer flag in ``[lo, hi]``: every flag of the package's
    commands is parsed and range-checked by one of these (or :func:`number_flag`), so a bad
    value is one line naming the flag before anything runs."""

    def parse(value: str) -> int:
        try:
            v = int(value.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {_show(value)}{_hint(hint)}") from None
        return _as_flag(lambda: integer("", v, lo=lo, hi=hi, hint=hint))

    parse.__name__ = "integer"
    return parse


def number_flag(
    lo: Optional[float] = None,
    hi: Optional[float] = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    what: str = "",
) -> Any:
    """An argparse ``type`` for a finite number flag in range (see :func:`number`)."""

    def parse(value: str) -> float:
        try:
            v = float(value.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {_show(value)}") from None
        return _as_flag(lambda: number("", v, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open, what=what))

    parse.__name__ = "number"
    return parse


def _as_flag(check: Any) -> Any:
    """``check()``'s value, its :class:`InputError` as argparse's type error (the flag's name is
    added by argparse)."""
    try:
        return check()
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e).strip()) from None


def device(name: str, value: Any) -> str:
    """A PyTorch device name: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    v = text(name, value)
    if v in ("auto", "cpu", "cuda") or (v.startswith("cuda:") and v[5:].isdigit()):
        return v
    raise InputError(f"{name} must be auto, cpu, cuda or cuda:N, got {_show(value)}")


def env_integer(key: str, *, lo: int = 0, hi: Optional[int] = None) -> Optional[int]:
    """The environment variable ``key`` as an integer in range (``None`` when unset): torchrun's
    ``WORLD_SIZE``/``RANK`` and thread counts are read with the same care as flags."""
    raw = os.environ.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise InputError(f"environment variable {key} must be an integer, got {_show(raw)}") from None
    return integer(f"environment variable {key}", value, lo=lo, hi=hi)


def input_file(name: str, value: Any) -> pathlib.Path:
    """A regular file that exists and can be read."""
    path = pathlib.Path(text(name, os.fspath(value)))
    if not path.is_file():
        what = "a folder" if path.is_dir() else "missing"
        raise InputError(f"{name} {path}: is {what}, not a readable file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{name} {path}: cannot be read (permissions)")
    return path


# --- Outputs, claimed before the work --------------------------------------------------------
# `python -m orthoformer.*` checks its output, creates and locks it before reading a corpus or
# training for minutes, as `orthoformer train` claims its folder: a bad `--out` is refused at
# once, two runs cannot write one output, and a failure leaves no folder or file behind.

LOCK_SUFFIX = ".lock"


def _lock(path: pathlib.Path, shown: str) -> int:
    """An exclusive ``flock`` on ``path`` (created, never through a link); the system releases
    it when the process dies, even by SIGKILL."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(
            f"{shown}: another process is writing it (lock {path.name}); wait for it or choose another"
        ) from None
    return fd


class Claim:
    """A claimed output: the folder (created, locked by ``LOCK``) and the files staged in it as
    ``.NAME.new`` until :meth:`commit` renames them into place. Used as a context manager: an
    exception undoes everything the claim made (staged files, lock, folders it created)."""

    def __init__(self, folder: pathlib.Path, lock: str, created: list[pathlib.Path], fd: int) -> None:
        self.folder, self.lock, self.created, self._fd = folder, folder / lock, created, fd
        self.staged: list[pathlib.Path] = []

    def stage(self, name: str) -> pathlib.Path:
        """Where to write ``name`` before the commit."""
        path = self.folder / f".{name}.new"
        path.unlink(missing_ok=True)  # a killed run's leftover, or a planted link: never followed
        self.staged.append(path)
        return path

    def commit(self, names: Iterable[str]) -> None:
        """Renames the staged ``names`` into place, in order (the one that makes the output
        valid, a ``meta.json``, last)."""
        for name in names:
            os.replace(self.folder / f".{name}.new", self.folder / name)

    def close(self, ok: bool = True) -> None:
        """Releases the lock; on failure removes what the claim made."""
        if not ok:
            for path in self.staged:
                path.unlink(missing_ok=True)
        self.lock.unlink(missing_ok=True)  # removed while held: no one else can hold it now
        os.close(self._fd)
        if not ok:
            for folder in reversed(self.created):
                try:
                    folder.rmdir()  # only when empty: never anything the user put there
                except OSError:
                    break

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.close(ok=kind is None)


def claim_file(flag: str, value: Any) -> Claim:
    """Claims the output file ``value`` in an existing folder: not a folder, writable; its
    new content is staged beside it and renamed over it (:meth:`Claim.commit`)."""
    path = pathlib.Path(text(flag, os.fspath(value)))
    parent = path.parent
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a folder: name a file to write")
    if path.exists() and not path.is_file():
        raise InputError(f"{flag} {path}: is not a regular file: name a file to write")
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: the folder {parent} does not exist: create it first")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{flag} {path}: cannot be written (permissions): choose another {flag}")
    fd = _lock(parent / f".{path.name}{LOCK_SUFFIX}", f"{flag} {path}")
    return Claim(parent, f".{path.name}{LOCK_SUFFIX}", [], fd)


def _range(lo: Optional[int], hi: Optional[int]) -> str:
    if lo is not None and hi is not None:
        return f"from {lo} to {hi}"
    if lo is not None:
        return f">= {lo}"
    return f"<= {hi}"


def _hint(hint: str) -> str:
    return f": {hint}" if hint else ""


__all__ = [
    "ArgumentParser",
    "safetensors_file",
    "COUNT_MAX",
    "Claim",
    "InputError",
    "SEED_MAX",
    "choice",
    "claim_file",
    "device",
    "env_integer",
    "field",
    "input_file",
    "int_flag",
    "integer",
    "mapping",
    "number",
    "number_flag",
    "one_line",
    "seed",
    "text",
]
