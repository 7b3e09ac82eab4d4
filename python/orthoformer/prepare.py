"""``python -m orthoformer.prepare``: text files or folders tokenized into a token folder
(``train.bin``, ``val.bin``, ``meta.json``, and ``tokenizer.json`` when there is a tokenizer)
that ``python -m orthoformer.train --data-dir`` trains on and nanoGPT's loader reads
(``np.memmap(path, dtype=np.uint16)`` for vocabularies up to 65,536).

    python -m orthoformer.prepare --input corpus/ --out data/owt --tokenizer gpt2
    python -m orthoformer.prepare --input text.txt --out data/smol --tokenizer models/tokenizer.json
    python -m orthoformer.prepare --input data/gcide/gcide.txt --out data/gcide-bpe8k --train-bpe 8192

The text streams through in chunks of about ``--chunk-mb`` megabytes cut at line ends, so
memory stays bounded whatever the corpus size; a progress line goes to stderr. The first
``1 - --val-fraction`` of the bytes (files in sorted order) become ``train.bin``, the rest
``val.bin``. Tokenizers: a tiktoken encoding by name (``gpt2``, ...; tiktoken downloads its
files at first use, or give ``--tiktoken-file`` offline), any Hugging Face
``tokenizer.json``, or ``--train-bpe VOCAB``: a byte-level BPE trained on ``train.bin``'s
text alone (never the validation bytes; :mod:`orthoformer.bpe_train`), recorded in
``meta.json``. Errors print one line and exit with status 2.
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

from . import bpe_train, tiktoken_hf
from .tokens import FORMAT, MAX_VOCAB, META_FILE, TOKENIZER_FILE, dtype_for, write_meta
from .validate import ArgumentParser, InputError, claim_folder, input_file, integer, number, one_line


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
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--tokenizer {path}: not a readable Hugging Face tokenizer.json ({e})") from None
    return _from_json(text, f"--tokenizer {path}")


def _from_json(text: str, shown: str) -> Tokenizer:
    """A ``tokenizer.json`` text (``shown`` names it in errors) as prepare's tokenizer."""
    try:
        import tokenizers
    except ImportError:
        raise ValueError("a tokenizer.json needs the tokenizers package: pip install tokenizers") from None
    try:
        tok = tokenizers.Tokenizer.from_str(text)
    except Exception as e:  # the tokenizers package's own exception type
        raise ValueError(f"{shown}: not a readable Hugging Face tokenizer.json ({e})") from None
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
            raise InputError(f"--input {given}: no such file or folder")
    if not out:
        raise InputError(f"--input {' '.join(inputs)}: no files to tokenize")
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


#: Largest ``--chunk-mb``: a tokenizer call on more text than this only costs memory.
MAX_CHUNK_MB = 4096.0
FILES = ("train.bin", "val.bin", TOKENIZER_FILE)


def is_token_folder(folder: pathlib.Path) -> bool:
    """Whether ``folder`` is a token folder (prepare may rewrite it)."""
    try:
        return json.loads((folder / META_FILE).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def check(
    inputs: Sequence[str], tok: Optional[Tokenizer], *, val_fraction: float, eot: bool, chunk_mb: float
) -> list[pathlib.Path]:
    """Every option and the tokenizer (``None``: one trained later, which has an end-of-text
    token) checked before the output is claimed: returns the files to read."""
    number("--val-fraction", val_fraction, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    number("--chunk-mb", chunk_mb, lo=0.0, hi=MAX_CHUNK_MB, lo_open=True)
    if tok is not None:
        integer("the tokenizer's vocabulary size", tok.vocab_size, lo=1, hi=MAX_VOCAB)
    if eot and tok is not None and tok.eot is None:
        raise InputError("--eot: this tokenizer has no end-of-text token; leave --eot out")
    files = input_files(inputs)
    total = sum(f.stat().st_size for f in files)
    if total * val_fraction < 1 or total * (1.0 - val_fraction) < 1:
        raise InputError(
            f"--val-fraction {val_fraction:g} of {total} bytes leaves a split empty: give more text "
            "or a fraction nearer 0.1"
        )
    return files


def prepare(
    inputs: Sequence[str],
    out: str,
    tok: Optional[Tokenizer],
    *,
    train_bpe: Optional[int] = None,
    val_fraction: float = 0.1,
    eot: bool = False,
    chunk_mb: float = 4.0,
    progress: bool = True,
) -> dict[str, Any]:
    """Tokenizes ``inputs`` into the token folder ``out`` (see the module doc); returns its
    ``meta.json``. ``tok`` is ``None`` with ``train_bpe`` (a vocabulary size): the tokenizer is
    then trained on the training share first. Everything is checked and ``out`` claimed
    (created, locked) first; the files are staged and renamed into place at the end,
    ``meta.json`` last, so a failure (or a kill) leaves ``out`` as it was, or without a
    ``meta.json`` that lies."""
    if (tok is None) == (train_bpe is None):
        raise InputError("give a tokenizer or --train-bpe, not both")
    if train_bpe is not None:
        train_bpe = bpe_train.check_vocab("--train-bpe", train_bpe)
    files = check(inputs, tok, val_fraction=val_fraction, eot=eot, chunk_mb=chunk_mb)
    total = sum(f.stat().st_size for f in files)
    with claim_folder("--out", out, "a token folder", is_token_folder, lock=".prepare.lock") as claim:
        staged = {name: claim.stage(name) for name in (*FILES, META_FILE)}
        if tok is None:
            tok = _trained(files, total, val_fraction, chunk_mb, train_bpe, progress)
        counts = _tokenize(files, total, tok, staged, val_fraction, eot, chunk_mb, progress)
        if counts["val"] == 0 or counts["train"] == 0:
            raise InputError(
                f"the split left {counts['train']} train and {counts['val']} validation tokens: give more "
                "text (or more lines), or another --val-fraction"
            )
        staged[TOKENIZER_FILE].write_text(tok.hf_json, encoding="utf-8")
        source = ", ".join(os.fspath(pathlib.Path(i).resolve()) for i in inputs)
        bins = {"train": staged["train.bin"], "val": staged["val.bin"]}
        meta = write_meta(
            claim.folder,
            tok.vocab_size,
            tok.record,
            source=source,
            text_bytes=total,
            eot=tok.eot,
            files=bins,
            meta_path=staged[META_FILE],
        )
        # An old meta.json goes first: between the renames the folder never describes files
        # it does not hold.
        (claim.folder / META_FILE).unlink(missing_ok=True)
        claim.commit([*FILES, META_FILE])
    return meta


def _trained(
    files: list[pathlib.Path], total: int, val_fraction: float, chunk_mb: float, vocab: Any, progress: bool
) -> Tokenizer:
    """The BPE of :mod:`orthoformer.bpe_train` trained on exactly the pieces that go to
    ``train.bin`` (:func:`pieces`), loaded as any ``tokenizer.json`` is."""
    if progress:
        print(f"training a {vocab}-token BPE on the training share ...", file=sys.stderr, flush=True)
    split_pieces = pieces(files, total, val_fraction, chunk_mb)
    texts = (_utf8(piece, path) for split, path, piece, _ in split_pieces if split == "train")
    doc, record = bpe_train.train(texts, vocab)
    tok = _from_json(doc, "--train-bpe")
    tok.record = {"kind": "hf", "trained": record}
    return tok


def pieces(
    files: list[pathlib.Path], total: int, val_fraction: float, chunk_mb: float
) -> Iterator[tuple[str, pathlib.Path, bytes, bool]]:
    """``(split, file, bytes, last piece of the file)`` in order: the text in chunks (see
    :func:`chunks`), the chunk holding the split point cut there (where chunks may be cut), so
    the ``"train"`` pieces are the first ``1 - val_fraction`` of the bytes (to a line end) and
    the ``"val"`` pieces the rest. The BPE trainer and the tokenizer read the same pieces."""
    cut = total * (1.0 - val_fraction)
    done, split = 0, "train"
    for path, data, last in chunks(files, max(1, int(chunk_mb * 2**20))):
        parts = [(data, last)]
        if split == "train" and done + len(data) > cut:
            k = _cut(data[: max(0, int(cut - done)) + 1])
            parts = [(data[:k], False), (data[k:], last)] if k > 0 else parts
        for i, (piece, end) in enumerate(parts):
            if i == 1 or (done >= cut and split == "train"):
                split = "val"
            yield split, path, piece, end
            done += len(piece)


def _tokenize(
    files: list[pathlib.Path],
    total: int,
    tok: Tokenizer,
    staged: dict[str, pathlib.Path],
    val_fraction: float,
    eot: bool,
    chunk_mb: float,
    progress: bool,
) -> dict[str, int]:
    """Streams ``files`` through ``tok`` into the staged ``train.bin``/``val.bin``; returns the
    token counts."""
    dtype = np.dtype(dtype_for(tok.vocab_size)).newbyteorder("<")
    done, counts, start = 0, {"train": 0, "val": 0}, time.perf_counter()
    with open(staged["train.bin"], "wb") as train, open(staged["val.bin"], "wb") as val:
        for split, path, piece, end in pieces(files, total, val_fraction, chunk_mb):
            ids = np.asarray(tok.encode(_utf8(piece, path)), dtype=np.int64)
            if eot and end:
                ids = np.append(ids, tok.eot)
            if ids.size and (ids.min() < 0 or ids.max() >= tok.vocab_size):
                # meta.json would lie about the vocabulary: refuse rather than write it.
                raise InputError(
                    f"the tokenizer gave id {int(ids.max())} for {path}, outside its vocabulary of "
                    f"{tok.vocab_size}: use another tokenizer.json"
                )
            (train if split == "train" else val).write(ids.astype(dtype).tobytes())
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
    return counts


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = ArgumentParser(prog="python -m orthoformer.prepare", description=__doc__.split("\n\n")[0])
    p.add_argument("--input", nargs="+", required=True, help="UTF-8 text files or folders of them")
    p.add_argument("--out", required=True, help="the token folder to write")
    p.add_argument(
        "--tokenizer",
        help="a tiktoken encoding name or a Hugging Face tokenizer.json path [default: gpt2]",
    )
    p.add_argument(
        "--train-bpe",
        metavar="VOCAB",
        help=f"train a byte-level BPE of VOCAB tokens ({bpe_train.MIN_VOCAB}..{bpe_train.MAX_VOCAB}) "
        "on the training share and use it (not with --tokenizer)",
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


def _int_or_text(value: str) -> Any:
    """A flag's text as an int when it is one (so the check names a bad value as given)."""
    try:
        return int(value, 10)
    except ValueError:
        return value


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs prepare; returns the exit status."""
    try:
        args = parser().parse_args(argv)
        # The cheap checks first: a bad flag is refused before a tokenizer is loaded (or
        # downloaded).
        number("--val-fraction", args.val_fraction, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        number("--chunk-mb", args.chunk_mb, lo=0.0, hi=MAX_CHUNK_MB, lo_open=True)
        vocab = None
        if args.train_bpe is not None:
            if args.tokenizer is not None or args.tiktoken_file is not None:
                raise InputError(
                    "--train-bpe trains the tokenizer: leave --tokenizer and --tiktoken-file out"
                )
            vocab = bpe_train.check_vocab("--train-bpe", _int_or_text(args.train_bpe))
        input_files(args.input)
        spec = args.tokenizer or "gpt2"
        if args.tiktoken_file is not None:
            input_file("--tiktoken-file", args.tiktoken_file)
            if spec.endswith(".json") or os.path.isfile(spec):
                raise InputError("--tiktoken-file applies to a tiktoken encoding name, not a tokenizer.json")
        tok = None if vocab is not None else tokenizer(spec, args.tiktoken_file)
        meta = prepare(
            args.input,
            args.out,
            tok,
            train_bpe=vocab,
            val_fraction=args.val_fraction,
            eot=args.eot,
            chunk_mb=args.chunk_mb,
            progress=not args.quiet,
        )
    except (ValueError, OSError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    print(
        json.dumps({k: meta[k] for k in ("dtype", "vocab_size", "train_tokens", "val_tokens", "tokenizer")})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
