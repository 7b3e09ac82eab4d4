"""``python -m orthoformer.prepare``: text files or folders tokenized into a token folder
(``train.bin``, ``val.bin``, ``meta.json``, and ``tokenizer.json`` when there is a tokenizer)
that ``python -m orthoformer.train --data-dir`` trains on and nanoGPT's loader reads
(``np.memmap(path, dtype=np.uint16)`` for vocabularies up to 65,536).

    python -m orthoformer.prepare --input corpus/ --out data/owt --tokenizer gpt2
    python -m orthoformer.prepare --input text.txt --out data/smol --tokenizer models/tokenizer.json

The text streams through in chunks of about ``--chunk-mb`` megabytes cut at line ends, so
memory stays bounded whatever the corpus size; a progress line goes to stderr. The first
``1 - --val-fraction`` of the bytes (files in sorted order) become ``train.bin``, the rest
``val.bin``. Tokenizers: a tiktoken encoding by name (``gpt2``, ...; tiktoken downloads its
files at first use, or give ``--tiktoken-file`` offline), or any Hugging Face
``tokenizer.json``. Errors print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

import numpy as np

from . import tiktoken_hf
from .tokens import TOKENIZER_FILE, dtype_for, write_meta


class Tokenizer:
    """What prepare needs of a tokenizer: ``encode(text) -> ids``, the vocabulary, the
    end-of-text id, the record ``meta.json`` keeps, and the ``tokenizer.json`` text."""

    def __init__(
        self,
        encode: Callable[[str], list[int]],
        vocab_size: int,
        eot: Optional[int],
        record: dict[str, Any],
        hf_json: str,
    ) -> None:
        self.encode, self.vocab_size, self.eot, self.record, self.hf_json = (
            encode,
            vocab_size,
            eot,
            record,
            hf_json,
        )


def tokenizer(spec: str, tiktoken_file: Optional[str] = None) -> Tokenizer:
    """``spec``: a path to a Hugging Face ``tokenizer.json``, or a tiktoken encoding name
    (``tiktoken_file``: its ranks, offline)."""
    if spec.endswith(".json") or os.path.isfile(spec):
        return _hf(spec)
    return from_tiktoken(tiktoken_hf.load(spec, tiktoken_file))


def from_tiktoken(enc: Any) -> Tokenizer:
    """A tiktoken ``Encoding`` (its ordinary text: special tokens are not parsed from text)."""
    doc = tiktoken_hf.to_hf_json(enc)
    eot = enc._special_tokens.get("<|endoftext|>")
    return Tokenizer(enc.encode_ordinary, enc.n_vocab, eot, {"kind": "tiktoken", "name": enc.name}, doc)


def _hf(path: str) -> Tokenizer:
    try:
        import tokenizers
    except ImportError:
        raise ValueError("a tokenizer.json needs the tokenizers package: pip install tokenizers") from None
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
        tok = tokenizers.Tokenizer.from_str(text)
    except Exception as e:  # OSError, UnicodeDecodeError, or the tokenizers package's own
        raise ValueError(f"--tokenizer {path}: not a readable Hugging Face tokenizer.json ({e})") from None
    eot = None
    for name in ("<|endoftext|>", "</s>", "<|im_end|>"):
        eot = tok.token_to_id(name)
        if eot is not None:
            break
    return Tokenizer(
        lambda s: tok.encode(s, add_special_tokens=False).ids,
        tok.get_vocab_size(True),
        eot,
        {"kind": "hf"},
        text,
    )


def input_files(inputs: Sequence[str]) -> list[pathlib.Path]:
    """The files named, and every non-hidden file under the folders named, sorted."""
    out: list[pathlib.Path] = []
    for given in inputs:
        p = pathlib.Path(given)
        if p.is_dir():
            out += sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
        elif p.is_file():
            out.append(p)
        else:
            raise ValueError(f"--input {given}: no such file or folder")
    if not out:
        raise ValueError(f"--input {' '.join(inputs)}: no files to tokenize")
    return out


def chunks(files: list[pathlib.Path], chunk_bytes: int) -> Iterator[tuple[pathlib.Path, bytes, bool]]:
    """``(file, bytes, last chunk of the file)``: each file read in pieces of about
    ``chunk_bytes`` cut after a line end (see :func:`_cut`)."""
    for path in files:
        with open(path, "rb") as f:
            pending = b""
            while True:
                block = f.read(chunk_bytes)
                data = pending + block
                if not block:
                    yield path, data, True
                    break
                cut = _cut(data)
                if cut == 0:
                    pending = data
                    continue
                pending = data[cut:]
                yield path, data[:cut], False


_SPACE = frozenset(b" \t\n\r\x0b\x0c")


def _cut(data: bytes) -> int:
    """Where to end a chunk: after the last newline with non-space bytes on both sides (0:
    none). Regex pre-tokenizers (GPT-2's, tiktoken's) make such a newline a piece of its own
    and never join pieces across it, so chunks cut there give the ids of the whole text."""
    end = len(data) - 1
    while True:
        pos = data.rfind(b"\n", 1, end)
        if pos < 1:
            return 0
        if data[pos - 1] not in _SPACE and data[pos + 1] not in _SPACE:
            return pos + 1
        end = pos


def _utf8(data: bytes, path: pathlib.Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path} is not UTF-8 text (byte {e.start} of a chunk): convert it or leave it out"
        ) from None


def prepare(
    inputs: Sequence[str],
    out: str,
    tok: Tokenizer,
    *,
    val_fraction: float = 0.1,
    eot: bool = False,
    chunk_mb: float = 4.0,
    progress: bool = True,
) -> dict[str, Any]:
    """Tokenizes ``inputs`` into the token folder ``out`` (see the module doc); returns its
    ``meta.json``."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"--val-fraction {val_fraction}: use a number between 0 and 1")
    files = input_files(inputs)
    total = sum(f.stat().st_size for f in files)
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    dtype = np.dtype(dtype_for(tok.vocab_size)).newbyteorder("<")
    cut = total * (1.0 - val_fraction)
    done, counts, start = 0, {"train": 0, "val": 0}, time.perf_counter()
    split = "train"
    with open(folder / "train.bin", "wb") as train, open(folder / "val.bin", "wb") as val:
        for path, data, last in chunks(files, max(1, int(chunk_mb * 2**20))):
            pieces = [(data, last)]
            if split == "train" and done + len(data) > cut:
                # The split point falls in this chunk: cut it there (where chunks may be cut).
                k = _cut(data[: max(0, int(cut - done)) + 1])
                pieces = [(data[:k], False), (data[k:], last)] if k > 0 else pieces
            for i, (piece, end) in enumerate(pieces):
                if i == 1 or (done >= cut and split == "train"):
                    split = "val"
                ids = tok.encode(_utf8(piece, path))
                if eot and end:
                    if tok.eot is None:
                        raise ValueError("--eot: this tokenizer has no end-of-text token")
                    ids = list(ids) + [tok.eot]
                (train if split == "train" else val).write(np.asarray(ids, dtype=dtype).tobytes())
                counts[split] += len(ids)
                done += len(piece)
            if progress:
                rate = done / 2**20 / max(time.perf_counter() - start, 1e-9)
                print(
                    f"\r{done / 2**20:,.1f} of {total / 2**20:,.1f} MB ({100 * done / max(total, 1):.0f}%), "
                    f"{sum(counts.values()):,} tokens, {rate:.1f} MB/s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
    if progress:
        print(file=sys.stderr)
    if counts["val"] == 0 or counts["train"] == 0:
        raise ValueError(
            f"the split left {counts['train']} train and {counts['val']} validation tokens: give more text "
            "(or more lines), or another --val-fraction"
        )
    (folder / TOKENIZER_FILE).write_text(tok.hf_json, encoding="utf-8")
    source = ", ".join(os.fspath(pathlib.Path(i).resolve()) for i in inputs)
    return write_meta(folder, tok.vocab_size, tok.record, source=source, text_bytes=total, eot=tok.eot)


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = argparse.ArgumentParser(prog="python -m orthoformer.prepare", description=__doc__.split("\n\n")[0])
    p.add_argument("--input", nargs="+", required=True, help="UTF-8 text files or folders of them")
    p.add_argument("--out", required=True, help="the token folder to write")
    p.add_argument(
        "--tokenizer",
        default="gpt2",
        help="a tiktoken encoding name or a Hugging Face tokenizer.json path [default: gpt2]",
    )
    p.add_argument("--tiktoken-file", help="the tiktoken encoding's ranks file (.tiktoken), for offline use")
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.1,
        help="share of the bytes (the last ones) for val.bin [default: 0.1]",
    )
    p.add_argument("--eot", action="store_true", help="append the end-of-text token after every file")
    p.add_argument("--chunk-mb", type=float, default=4.0, help="text per tokenizer call [default: 4]")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs prepare; returns the exit status."""
    args = parser().parse_args(argv)
    try:
        tok = tokenizer(args.tokenizer, args.tiktoken_file)
        meta = prepare(
            args.input,
            args.out,
            tok,
            val_fraction=args.val_fraction,
            eot=args.eot,
            chunk_mb=args.chunk_mb,
            progress=not args.quiet,
        )
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        json.dumps({k: meta[k] for k in ("dtype", "vocab_size", "train_tokens", "val_tokens", "tokenizer")})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
