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


def _paths(out: Union[PathArg, Sequence[PathArg], None]) -> list[str]:
    """``out`` as a list of paths: none, one, or several."""
    if out is None:
        return []
    if isinstance(out, (str, os.PathLike)):
        return [os.fspath(out)]
    return [os.fspath(p) for p in out]


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
    outs = _paths(out)
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


def align_weights(
    model: PathArg,
    model_b: PathArg,
    out: Union[PathArg, Sequence[PathArg], None] = None,
    *,
    residual: str = "rotation",
    heads: bool = False,
    permute_ffn: bool = False,
    iterations: Optional[int] = None,
    gguf_type: str = "f32",
    check: Optional[PathArg] = None,
    check_tokens: Optional[int] = None,
    context: Optional[int] = None,
    tolerance: Optional[float] = None,
    true_rotation: Optional[str] = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Aligns ``model_b``'s weights to ``model``'s, as ``orthoformer align --weights`` does:
    both models' RMSNorm weights are folded, the residual-stream rotation ``R`` minimising
    ``‖A − B·R‖_F`` over every matrix is fitted by orthogonal Procrustes (with ``heads``, one
    rotation per value head too; with ``permute_ffn``, a permutation of each layer's FFN
    units; alternating for at most ``iterations`` rounds). ``residual="permutation"`` fits
    only a permutation of residual channels instead of a rotation (Git Re-Basin's weight
    matching, for comparison), and applied to B exactly, so the
    aligned model computes B's function. That is checked on the text ``check`` (default: the
    embedded TinyShakespeare), ``check_tokens`` tokens (default 256) in windows of
    ``context`` (default 128), within ``tolerance`` (default 1e-2) of B's logits; the aligned
    model is written to ``out`` (a ``.gguf`` path or a Hugging Face folder; a list writes
    several) only when the check passes. ``true_rotation`` (``random``/``hadamard``) and
    ``seed`` name the rotation B was made with by :func:`rotate`: the report then holds the
    fitted map's distance to its inverse. Returns the report (``distance_before``,
    ``distance_after``, every ``steps`` entry, ``check``, ``check_passed``, ``outputs``) as
    a dict; bad inputs raise ``ValueError``/``OSError``.
    """
    outs = _paths(out)
    report = _native.align_weights_model(
        os.fspath(model),
        os.fspath(model_b),
        outs,
        residual,
        heads,
        permute_ffn,
        iterations,
        gguf_type,
        None if check is None else os.fspath(check),
        check_tokens,
        context,
        tolerance,
        true_rotation,
        seed,
    )
    return json.loads(report)
