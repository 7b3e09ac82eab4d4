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

from . import _native, file_set
from .validate import InputError, env_integer, integer, mapping, text

META_FILE = "meta.json"
FORMAT = "orthoformer-tokens"
TOKENIZER_FILE = "tokenizer.json"
SPLITS = ("train", "val")
#: The file-set tag prepare writes a folder's files under (``.tokens.commit``, ...).
TAG = "tokens"
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
    files: Optional[dict[str, PathArg]] = None,
    meta_path: Optional[PathArg] = None,
) -> dict[str, Any]:
    """Writes ``meta.json`` for the ``train.bin``/``val.bin`` already in ``folder`` (their
    token counts and SHA-256 are taken from the files) and returns it. ``tokenizer`` is
    ``{"kind": "tiktoken", "name": ...}``, ``{"kind": "hf"}`` (with ``tokenizer.json`` in the
    folder) or ``{"kind": "ids"}``; use this for token ids made by one's own tools.
    ``files`` and ``meta_path`` name staged copies instead (prepare renames them into place)."""
    folder = pathlib.Path(folder)
    vocab_size = integer("vocab_size", vocab_size, lo=1, hi=MAX_VOCAB)
    dtype = dtype_for(vocab_size)
    width = np.dtype(dtype).itemsize
    digest = hashlib.sha256()
    counts = {}
    for split in SPLITS:
        path = pathlib.Path((files or {}).get(split, folder / f"{split}.bin"))
        size = path.stat().st_size
        if size % width:
            raise InputError(f"{path} holds {size} bytes, not a whole number of {dtype} tokens")
        counts[split] = size // width
        top = -1
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(SCAN_BYTES), b""):
                digest.update(block)
                ids = np.frombuffer(block, dtype=np.dtype(dtype).newbyteorder("<"))
                top = max(top, int(ids.max())) if ids.size else top
        # The ids are read anyway (for the hash): a meta.json that declares fewer tokens than
        # the files use is refused here, not written for a trainer to find later.
        if top >= vocab_size:
            raise InputError(
                f"vocab_size {vocab_size} is not above the largest id in {path.name}, {top}: give the "
                "tokenizer's whole vocabulary"
            )
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
    check_meta(meta, "meta.json")
    target = pathlib.Path(meta_path or folder / META_FILE)
    # Staged beside and renamed: never written through a link planted at meta.json.
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, target)
    return meta


class TokenFolder:
    """A token folder, checked before anything is built from it: every field of ``meta.json``
    (type, range, and agreement with the files: sizes, SHA-256, every id below
    ``vocab_size``, the dtype holding the vocabulary, the tokenizer file present) and the
    token count of each split; :meth:`open` maps a split. A lie is an
    :class:`~orthoformer.validate.InputError` naming the field, never an ``IndexError`` in
    the model's embedding later."""

    def __init__(self, folder: PathArg) -> None:
        self.path = pathlib.Path(folder).resolve()
        if file_set.pending(self.path, TAG):
            # A prepare killed after its commit point: its renames are finished first (under
            # the set's lock), so the files read are the new set, never a mix.
            file_set.FileSet(self.path, TAG, []).close()
        meta_path = self.path / META_FILE
        if not meta_path.is_file():
            raise InputError(
                f"--data-dir {folder}: no {META_FILE} there; make the folder with python -m "
                "orthoformer.prepare --input TEXT --out DIR"
            )
        self.meta = check_meta(_read_json(meta_path), meta_path)
        self.vocab_size = int(self.meta["vocab_size"])
        width = np.dtype(self.meta["dtype"]).itemsize
        self.lengths: dict[str, int] = {}
        for split in SPLITS:
            path = self.path / f"{split}.bin"
            want = self.meta[f"{split}_tokens"]
            if not path.is_file() or path.stat().st_size != want * width:
                raise InputError(
                    f"{path} is missing or not the {want} {self.meta['dtype']} tokens {META_FILE} "
                    "says: prepare the folder again"
                )
            self.lengths[split] = want
        _check_contents(self, meta_path)
        spec = self.tokenizer_spec()
        if spec["kind"] != "ids":
            # Its vocabulary must be the folder's: checked here, before a trainer builds a model
            # or makes its output folder (the checkpoint records this tokenizer).
            n = _native.Tokenizer(json.dumps(spec)).vocab_size()
            if n != self.vocab_size:
                raise InputError(
                    f"{meta_path} field vocab_size {self.vocab_size} is not the {n} tokens of "
                    f"{TOKENIZER_FILE} beside it; {_HOW}"
                )

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
                raise InputError(
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
            raise InputError(
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


#: Bytes read at a time when a folder's ids are checked (a multiple of both widths).
SCAN_BYTES = 1 << 24
#: Largest vocabulary a token file can index (``uint32`` ids).
MAX_VOCAB = 1 << 32
_HOW = "prepare the folder again (python -m orthoformer.prepare) or correct meta.json"
#: Folders already scanned in this process, by (path, sizes, mtimes): under torchrun, resume
#: and evaluation a folder is opened more than once, and its ids need reading only once.
_SCANNED: set[tuple] = set()


def _read_json(path: pathlib.Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path} does not parse as JSON ({e}); {_HOW}") from None
    except RecursionError:
        raise InputError(f"{path} nests too deeply to be a {META_FILE}; {_HOW}") from None


def check_meta(meta: Any, where: Any) -> dict[str, Any]:
    """``meta.json``'s fields checked for type and range and against each other (not yet
    against the files): returns them with defaults for the optional ones."""
    m = dict(mapping(f"{where}", meta))

    def need(key: str) -> Any:
        if key not in m:
            raise InputError(f"{where} has no field {key!r}; {_HOW}")
        return m[key]

    def name(key: str) -> str:
        return f"{where} field {key}"

    if need("format") != FORMAT:
        raise InputError(f"{name('format')} must be {FORMAT!r}, got {m['format']!r}: not a token folder")
    integer(name("version"), m.get("version", 1), lo=1, hi=1, hint="this package reads version 1")
    dtype = need("dtype")
    if dtype not in ("uint16", "uint32"):
        raise InputError(f"{name('dtype')} must be uint16 or uint32, got {dtype!r}; {_HOW}")
    vocab = integer(name("vocab_size"), need("vocab_size"), lo=1, hi=MAX_VOCAB, hint=_HOW)
    if dtype == "uint16" and vocab > 1 << 16:
        raise InputError(
            f"{name('dtype')} uint16 cannot hold the ids of vocab_size {vocab} (at most 65536): {_HOW}"
        )
    for split in SPLITS:
        integer(name(f"{split}_tokens"), need(f"{split}_tokens"), lo=1, hint=_HOW)
    digest = text(name("sha256"), need("sha256"))
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise InputError(f"{name('sha256')} must be 64 lower-case hex digits, got {digest[:70]!r}; {_HOW}")
    raw = m.get("tokenizer")
    tok = {"kind": "ids"} if raw is None else mapping(name("tokenizer"), raw)
    kind = tok.get("kind")
    if kind not in ("hf", "tiktoken", "ids"):
        raise InputError(f"{name('tokenizer')} kind must be hf, tiktoken or ids, got {kind!r}; {_HOW}")
    if kind == "tiktoken":
        text(name("tokenizer.name"), tok.get("name", ""))
    text(name("source"), m.get("source", ""))
    integer(name("text_bytes"), m.get("text_bytes", 0), lo=0)
    if m.get("eot") is not None:
        integer(name("eot"), m["eot"], lo=0, hi=vocab - 1, hint="an id of the vocabulary, or null")
    m["tokenizer"] = dict(tok)
    return m


def _check_contents(folder: TokenFolder, meta_path: pathlib.Path) -> None:
    """The ids against ``meta.json``: one pass over both files (in blocks, so memory stays
    bounded whatever the corpus) hashing them and finding the largest id."""
    files = [folder.path / f"{split}.bin" for split in SPLITS]
    key = (os.fspath(folder.path), *((f.stat().st_size, f.stat().st_mtime_ns) for f in files))
    key += (folder.meta["sha256"], folder.vocab_size)
    # Under torchrun the node's first rank reads the ids; the others on the node open the same
    # files (after rank 0 succeeded, see World.main_first) and need not read a corpus again.
    if key in _SCANNED or (env_integer("LOCAL_RANK") or 0) > 0:
        return
    dtype = np.dtype(folder.meta["dtype"]).newbyteorder("<")
    digest = hashlib.sha256()
    for path in files:
        top = -1
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(SCAN_BYTES), b""):
                digest.update(block)
                ids = np.frombuffer(block, dtype=dtype)
                top = max(top, int(ids.max())) if ids.size else top
        if top >= folder.vocab_size:
            raise InputError(
                f"{path} holds token id {top}, not below {meta_path} field vocab_size "
                f"{folder.vocab_size}: the ids and meta.json disagree; {_HOW}"
            )
    if digest.hexdigest() != folder.meta["sha256"]:
        raise InputError(
            f"{meta_path} field sha256 is not the SHA-256 of train.bin + val.bin: the files were "
            f"changed after meta.json was written; {_HOW}"
        )
    _SCANNED.add(key)


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
