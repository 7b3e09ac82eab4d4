"""Orthoformer from Python: the Rust library's initialisers, accounting, rotation, generation
and checkpoints (``orthoformer.init``, :func:`params`, :func:`rotate`, :func:`generate`,
:func:`load_checkpoint`, :func:`save_checkpoint`), the same GPT in PyTorch
(``orthoformer.torch``) and data-parallel training on ``torch.distributed`` (``python -m
orthoformer.train``).

Everything here calls the Rust library through the native module ``orthoformer._native``;
nothing is re-implemented, so results are the command line's to the bit. ``import
orthoformer`` gives every submodule (``orthoformer.init``, ``orthoformer.checkpoint``, ...);
the PyTorch layer ``orthoformer.torch`` is imported on first use, so the rest needs only
NumPy.
"""

import importlib
from typing import Any

from . import _native, accounting, checkpoint, config, data, generation, init, model, rotation
from .accounting import params
from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from .config import GPTConfig
from .data import BatchSampler, Data
from .generation import generate, generate_batch
from .model import RustGPT
from .rotation import align_weights, rotate

__version__: str = _native.__version__


def __getattr__(name: str) -> Any:
    """``orthoformer.torch`` (and ``orthoformer.train``), imported when first used."""
    if name in ("torch", "train"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'orthoformer' has no attribute {name!r}")


__all__ = [
    "BatchSampler",
    "Checkpoint",
    "Data",
    "GPTConfig",
    "RustGPT",
    "accounting",
    "checkpoint",
    "config",
    "data",
    "generate",
    "generate_batch",
    "generation",
    "init",
    "load_checkpoint",
    "model",
    "rotation",
    "params",
    "rotate",
    "align_weights",
    "save_checkpoint",
]
