"""Training text through the library's ``data`` module: :class:`Data` (a UTF-8 text, its
character or byte-level BPE tokenizer, the 90/10 train/validation split) and
:class:`BatchSampler` (seeded random windows, the sampler ``orthoformer train`` draws from)."""

from __future__ import annotations

import json
import os
from os import PathLike
from typing import Any, Optional, Union

import numpy as np

from . import _native
from .validate import choice, integer
from .validate import seed as seed_check

DEFAULTS: dict[str, Any] = json.loads(_native.train_defaults())


def u32(buf: Union[bytes, bytearray], shape: Optional[tuple[int, ...]] = None) -> np.ndarray:
    """Little-endian u32 bytes from the native module as an ``int64`` array (PyTorch's index
    type)."""
    a = np.frombuffer(buf, dtype="<u4").astype(np.int64)
    return a if shape is None else a.reshape(shape)


def ids_bytes(ids: Any) -> bytes:
    """Token ids (any integer array-like) as little-endian u32 bytes; negative or too large
    ids raise ``ValueError``."""
    a = np.asarray(ids)
    if a.size and (a.dtype.kind not in "iu" or a.min() < 0 or a.max() > 0xFFFFFFFF):
        raise ValueError("token ids must be integers in [0, 2^32)")
    return np.ascontiguousarray(a, dtype="<u4").tobytes()


class Data:
    """A text tokenized and split 90/10 (first 90% train), as ``orthoformer train`` prepares
    it: ``path`` (default: the embedded TinyShakespeare), ``tokenizer`` ``char`` or ``bpe``
    (``vocab_size``, default 512), checked to hold a window of ``context + 1`` tokens."""

    def __init__(
        self,
        path: Union[str, PathLike[str], None] = None,
        tokenizer: str = "char",
        vocab_size: Optional[int] = None,
        context: int = DEFAULTS["context"],
        *,
        _native_data: Any = None,
    ) -> None:
        if _native_data is not None:
            self._d = _native_data
        else:
            p = None if path is None else os.fspath(path)
            # Checked here: the native module would raise OverflowError on a negative size.
            choice("tokenizer", tokenizer, ("char", "bpe"))
            if vocab_size is not None:
                integer("vocab_size", vocab_size, lo=1, hi=2**32)
            integer("context", context, lo=1)
            self._d = _native.Data(p, tokenizer, vocab_size, context)

    @property
    def vocab_size(self) -> int:
        """Vocabulary size ``V``."""
        return self._d.vocab_size()

    @property
    def tokenizer(self) -> str:
        """``char`` or ``bpe``."""
        return self._d.tokenizer_kind()

    @property
    def record(self) -> dict[str, Any]:
        """Where the text came from: ``source``, ``bytes``, ``sha256``."""
        return json.loads(self._d.record_json())

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text``."""
        return u32(self._d.encode(text))

    def decode(self, ids: Any) -> str:
        """The text of token ids."""
        return self._d.decode(ids_bytes(ids))

    def tokens(self, split: str = "train") -> np.ndarray:
        """The ``train`` or ``val`` tokens."""
        return u32(self._d.tokens(split))


class BatchSampler:
    """The library's seeded batch sampler: each batch is ``b`` windows of ``t + 1`` tokens at
    uniformly random offsets (inputs the first ``t``, targets the last ``t``). ``word_pos``
    (from :attr:`word_pos`) restores a saved position."""

    def __init__(self, seed: int, word_pos: Optional[str] = None) -> None:
        self._s = _native.BatchSampler(seed_check("seed", seed), word_pos)

    @property
    def word_pos(self) -> str:
        """The generator's position (a u128 as a decimal string)."""
        return self._s.word_pos()

    def next_batch(self, data: Data, b: int, t: int, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
        """``(inputs, targets)``, each ``(b, t)`` int64."""
        choice("split", split, ("train", "val"))
        b, t = integer("b", b, lo=1), integer("t", t, lo=1)
        x, y = self._s.next_batch(data._d, split, b, t)
        return u32(x, (b, t)), u32(y, (b, t))
