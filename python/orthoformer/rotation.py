"""Orthogonal rotation of a pretrained Llama-style model (GGUF or Hugging Face folder), as
``orthoformer rotate`` does it with the library's ``rotate`` module: fold the RMSNorm
weights, rotate the residual stream by a Haar-random or randomised Hadamard matrix (f64),
write the result, and optionally check on a text that the logits did not change."""

from __future__ import annotations

import json
import os
from os import PathLike
from typing import Any, Optional, Union
from collections.abc import Sequence

from . import _native

PathArg = Union[str, "PathLike[str]"]


def rotate(
    model: PathArg,
    out: Union[PathArg, Sequence[PathArg], None] = None,
    *,
    rotation: str = "hadamard",
    seed: int = 0,
    gguf_type: str = "f32",
    check: Union[PathArg, bool, None] = None,
    check_tokens: Optional[int] = None,
    context: Optional[int] = None,
    tolerance: Optional[float] = None,
) -> dict[str, Any]:
    """Rotates ``model`` and writes it to ``out``: a path ending in ``.gguf`` is a GGUF file
    (``gguf_type`` ``f32`` or ``f16``), anything else a Hugging Face folder; a list writes
    several. ``rotation`` is ``hadamard`` or ``random``. With ``check`` (a text file, or
    ``True`` for the embedded TinyShakespeare) both models are run on its first
    ``check_tokens`` tokens (default 256) in windows of ``context`` (default 128) and the
    report's ``check`` holds the largest logit difference, mean KL, top-1 agreement and both
    perplexities; ``check_passed`` says whether the largest difference is within
    ``tolerance`` (default 1e-2). This is the library's one rotate operation, as
    ``orthoformer rotate`` runs it: both refuse the same inputs with the same message. Returns
    the report as a dict; bad inputs raise ``ValueError``/``OSError``.
    """
    if out is None:
        outs: list[str] = []
    elif isinstance(out, (str, os.PathLike)):
        outs = [os.fspath(out)]
    else:
        outs = [os.fspath(p) for p in out]
    data = None if check is None or isinstance(check, bool) else os.fspath(check)
    report = _native.rotate_model(
        os.fspath(model),
        outs,
        rotation,
        seed,
        gguf_type,
        check is not None and check is not False,
        data,
        check_tokens,
        context,
        tolerance,
    )
    return json.loads(report)
