"""Folders of pre-tokenized data (``python -m orthoformer.prepare`` writes them): ``train.bin``
and ``val.bin`` hold the token ids back to back, little-endian ``uint16`` when the vocabulary
fits (nanoGPT's layout, so its loader ``np.memmap(path, dtype=np.uint16, mode="r")`` reads
them) and ``uint32`` otherwise; ``meta.json`` says which, with the vocabulary, the tokenizer
and the token counts. :class:`TokenFolder` opens one as memory maps (nothing is loaded) and
:class:`TokenSampler` draws batches from it, each rank reading only its own rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from os import PathLike
from typing import Any, Optional, Union

import numpy as np

from . import _native

META_FILE = "meta.json"
FORMAT = "orthoformer-tokens"
TOKENIZER_FILE = "tokenizer.json"
SPLITS = ("train", "val")
#: Seed offset of the fixed evaluation batches (the library's trainer uses its own rule).
EVAL_STREAM = 0x5EED_E7A1

PathArg = Union[str, "PathLike[str]"]


def dtype_for(vocab_size: int) -> str:
    """``uint16`` when every id fits 16 bits, else ``uint32``."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


def write_meta(
    folder: PathArg,
    vocab_size: int,
    tokenizer: dict[str, Any],
    *,
    source: str = "",
    text_bytes: int = 0,
    eot: Optional[int] = None,
) -> dict[str, Any]:
    """Writes ``meta.json`` for the ``train.bin``/``val.bin`` already in ``folder`` (their
    token counts and SHA-256 are taken from the files) and returns it. ``tokenizer`` is
    ``{"kind": "tiktoken", "name": ...}``, ``{"kind": "hf"}`` (with ``tokenizer.json`` in the
    folder) or ``{"kind": "ids"}``; use this for token ids made by one's own tools."""
    folder = pathlib.Path(folder)
    dtype = dtype_for(vocab_size)
    width = np.dtype(dtype).itemsize
    digest = hashlib.sha256()
    counts = {}
    for split in SPLITS:
        path = folder / f"{split}.bin"
        size = path.stat().st_size
        if size % width:
            raise ValueError(f"{path} holds {size} bytes, not a whole number of {dtype} tokens")
        counts[split] = size // width
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                digest.update(block)
    meta = {
        "format": FORMAT,
        "version": 1,
        "dtype": dtype,
        "vocab_size": int(vocab_size),
        "tokenizer": tokenizer,
        "train_tokens": counts["train"],
        "val_tokens": counts["val"],
        "sha256": digest.hexdigest(),
        "source": source,
        "text_bytes": int(text_bytes),
        "eot": eot,
    }
    (folder / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


class TokenFolder:
    """A token folder, checked: ``meta`` (the parsed ``meta.json``) and the token count of
    each split (file sizes agree with ``meta.json``; ids are not read); :meth:`open` maps a
    split."""

    def __init__(self, folder: PathArg) -> None:
        self.path = pathlib.Path(folder).resolve()
        meta_path = self.path / META_FILE
        if not meta_path.is_file():
            raise ValueError(
                f"--data-dir {folder}: no {META_FILE} there; make the folder with python -m "
                "orthoformer.prepare --input TEXT --out DIR"
            )
        try:
            self.meta: dict[str, Any] = json.loads(meta_path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{meta_path} does not parse ({e}); prepare the folder again") from None
        if self.meta.get("format") != FORMAT or self.meta.get("dtype") not in ("uint16", "uint32"):
            raise ValueError(f"{meta_path} is not an {FORMAT} description with dtype uint16 or uint32")
        self.vocab_size = int(self.meta["vocab_size"])
        self.lengths: dict[str, int] = {}
        for split in SPLITS:
            path = self.path / f"{split}.bin"
            want = int(self.meta[f"{split}_tokens"])
            width = np.dtype(self.meta["dtype"]).itemsize
            if not path.is_file() or path.stat().st_size != want * width:
                raise ValueError(
                    f"{path} is missing or not the {want} {self.meta['dtype']} tokens {META_FILE} "
                    "says: prepare the folder again"
                )
            self.lengths[split] = want

    def open(self, split: str) -> np.memmap:
        """A fresh read-only memory map of ``split``: opened per batch (as nanoGPT does), so
        the pages read are not held by a long-lived map and the process's resident memory
        does not grow over a corpus larger than RAM."""
        dtype = np.dtype(self.meta["dtype"]).newbyteorder("<")
        return np.memmap(self.path / f"{split}.bin", dtype=dtype, mode="r")

    def check_context(self, t: int) -> None:
        """Both splits must hold one window of ``t + 1`` tokens."""
        for split, n in self.lengths.items():
            if n <= t:
                raise ValueError(
                    f"{self.path}/{split}.bin holds {n} tokens, fewer than one window of "
                    f"{t + 1} (context + 1): use more text or a shorter --context"
                )

    def tokenizer_spec(self) -> dict[str, Any]:
        """The tokenizer record a checkpoint stores (``orthoformer._native.Tokenizer``'s
        input): the Hugging Face document travels inline."""
        tok = dict(self.meta.get("tokenizer") or {"kind": "ids"})
        kind = tok.get("kind")
        if kind == "ids":
            return {"kind": "ids", "vocab_size": self.vocab_size}
        path = self.path / TOKENIZER_FILE
        if kind not in ("hf", "tiktoken") or not path.is_file():
            raise ValueError(
                f"{self.path}/{META_FILE}: tokenizer {tok} needs {TOKENIZER_FILE} beside it "
                "(kind hf or tiktoken), or use kind ids"
            )
        spec = {"kind": kind, "json": path.read_text(encoding="utf-8")}
        if kind == "tiktoken":
            spec["name"] = str(tok.get("name", ""))
        return spec

    def record(self) -> dict[str, Any]:
        """The data record a checkpoint stores: the folder, its size and SHA-256."""
        width = np.dtype(self.meta["dtype"]).itemsize
        size = sum(self.lengths.values()) * width
        return {"source": os.fspath(self.path), "bytes": int(size), "sha256": self.meta["sha256"]}


class TokenSampler:
    """Seeded random windows of a :class:`TokenFolder`: batch ``k`` of a stream is ``B``
    offsets drawn from ``numpy.random.default_rng([seed, stream, k])``, so any batch can be
    redrawn from its number (the checkpoint stores the count) and every rank draws the same
    offsets; :meth:`rows` reads only the rows asked for from the memory map."""

    def __init__(self, folder: TokenFolder, seed: int, stream: int = 0, position: int = 0) -> None:
        self.folder, self.seed, self.stream, self.position = folder, seed, stream, position
        self.offsets: Optional[np.ndarray] = None

    def draw(self, split: str, b: int, t: int) -> None:
        """Draws the next batch of ``b`` windows of ``t + 1`` tokens (offsets only)."""
        n = self.folder.lengths[split]
        rng = np.random.default_rng([self.seed, self.stream, self.position])
        self.offsets = rng.integers(0, n - t, size=b, dtype=np.int64)
        self.split, self.t = split, t
        self.position += 1

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``lo..hi`` of the drawn batch: ``(inputs, targets)``, each ``(hi-lo, t)``
        int64, read from the memory map."""
        assert self.offsets is not None, "draw() first"
        mm, t = self.folder.open(self.split), self.t
        win = np.stack([np.asarray(mm[o : o + t + 1], dtype=np.int64) for o in self.offsets[lo:hi]])
        return win[:, :-1], win[:, 1:]


class Tokenizer:
    """A checkpoint's tokenizer as the library runs it (``orthoformer generate`` and ``eval``
    encode and decode with the same code): character, byte-level BPE, Hugging Face,
    tiktoken (as its ``tokenizer.json``) or ids only (text is the ids in decimal)."""

    def __init__(self, record: dict[str, Any]) -> None:
        self._t = _native.Tokenizer(json.dumps(record))

    @classmethod
    def of_checkpoint(cls, state: dict[str, Any], folder: PathArg) -> Tokenizer:
        """The tokenizer ``state.json``'s record ``state["tokenizer"]`` names in ``folder``."""
        rec = dict(state["tokenizer"])
        file = rec.pop("file", None)
        if file is not None:
            rec["json"] = (pathlib.Path(folder) / file).read_text(encoding="utf-8")
        return cls(rec)

    @property
    def vocab_size(self) -> int:
        """Vocabulary size."""
        return self._t.vocab_size()

    @property
    def name(self) -> str:
        """``char``, ``bpe``, ``hf``, ``tiktoken:NAME`` or ``ids``."""
        return self._t.name()

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (int64)."""
        return np.frombuffer(self._t.encode(text), dtype="<u4").astype(np.int64)

    def decode(self, ids: Any) -> str:
        """The text of token ids."""
        return self._t.decode(np.ascontiguousarray(np.asarray(ids), dtype="<u4").tobytes())
