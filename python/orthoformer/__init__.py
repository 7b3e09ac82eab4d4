"""Orthoformer from Python: the Rust library's initialisers, accounting, rotation and
checkpoints (``orthoformer.init``, :func:`params`, :func:`rotate`, :func:`load_checkpoint`,
:func:`save_checkpoint`), the same GPT in PyTorch (``orthoformer.torch``) and data-parallel
training on ``torch.distributed`` (``python -m orthoformer.train``).

Everything here calls the Rust library through the native module ``orthoformer._native``;
nothing is re-implemented, so results are the command line's to the bit. The PyTorch layer
is imported only on demand (``import orthoformer.torch``), so the rest needs only NumPy.
"""

from . import _native
from .accounting import params
from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from .config import GPTConfig
from .data import BatchSampler, Data
from .model import RustGPT
from .rotation import rotate

__version__: str = _native.__version__

__all__ = [
    "BatchSampler",
    "Checkpoint",
    "Data",
    "GPTConfig",
    "RustGPT",
    "load_checkpoint",
    "params",
    "rotate",
    "save_checkpoint",
]
