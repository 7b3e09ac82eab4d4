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

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any, Optional

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


def integer(name: str, value: Any, *, lo: Optional[int] = None, hi: Optional[int] = None, hint: str = "") -> int:
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
) -> float:
    """``value`` as a finite float in the range (bounds closed unless ``*_open``), or an
    :class:`InputError` naming ``name``."""
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
        bounds = " and ".join(b for b in (left, right) if b)
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
        raise InputError(f"{where} has no {key!r}: write it (or recreate the file with the tool that made it)")
    return fields[key]


def _range(lo: Optional[int], hi: Optional[int]) -> str:
    if lo is not None and hi is not None:
        return f"from {lo} to {hi}"
    if lo is not None:
        return f">= {lo}"
    return f"<= {hi}"


def _hint(hint: str) -> str:
    return f": {hint}" if hint else ""


__all__ = ["InputError", "SEED_MAX", "choice", "field", "integer", "mapping", "number", "seed", "text"]
