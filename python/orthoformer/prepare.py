"""``python -m orthoformer.prepare``: text files or folders tokenized into a token folder
(``train.bin``, ``val.bin``, ``meta.json``, and ``tokenizer.json`` when there is a tokenizer)
that ``python -m orthoformer.train --data-dir`` trains on and nanoGPT's loader reads
(``np.memmap(path, dtype=np.uint16)`` for vocabularies up to 65,536).

    python -m orthoformer.prepare --input corpus/ --out data/owt --tokenizer gpt2
    python -m orthoformer.prepare --input text.txt --out data/smol --tokenizer models/tokenizer.json
    python -m orthoformer.prepare --input data/gcide/gcide.txt --out data/gcide-bpe8k --train-bpe 8192

The text streams through in chunks of about ``--chunk-mb`` megabytes cut at line ends, so
memory stays bounded whatever the corpus size; a progress line goes to stderr. The first
``1 - --val-fraction`` of the bytes (files in sorted order, to within 0.1%:
:mod:`orthoformer.prepare_text`) become ``train.bin``, the rest ``val.bin``. Tokenizers
(:mod:`orthoformer.prepare_tokenizer`): a tiktoken encoding by name (``gpt2``, ...;
tiktoken downloads its files at first use, or give ``--tiktoken-file`` offline), any Hugging
Face ``tokenizer.json``, or ``--train-bpe VOCAB``: a byte-level BPE trained on ``train.bin``'s
text alone (never the validation bytes; :mod:`orthoformer.bpe_train`), recorded in
``meta.json``. ``--out`` is a new or empty folder or a token folder (nothing else in it), never
an input or inside one, and its files are replaced as one set (:mod:`orthoformer.outputs`): a
failed or killed run leaves the old folder as it was. Errors print one line and exit with
status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from . import bpe_train
from .outputs import check_apart, is_working_file, output_folder
from .prepare_text import input_files, pieces, utf8
from .prepare_tokenizer import Tokenizer, from_json, from_tiktoken, is_json_path, tokenizer
from .tokens import FORMAT, MAX_VOCAB, META_FILE, TAG, TOKENIZER_FILE, dtype_for, write_meta
from .validate import ArgumentParser, InputError, input_file, int_flag, integer, number, number_flag, one_line

#: Largest ``--chunk-mb``: a tokenizer call on more text than this only costs memory.
MAX_CHUNK_MB = 4096.0
FILES = ("train.bin", "val.bin", TOKENIZER_FILE)


def is_token_folder(folder: pathlib.Path) -> bool:
    """Whether ``folder`` is a token folder prepare may rewrite: its ``meta.json`` (a plain
    file) says so and it holds nothing else but the token files (and working files). A
    checkpoint, a model folder or any folder with other files in it is not one, whatever its
    ``meta.json`` says."""
    meta = folder / META_FILE
    try:
        if meta.is_symlink() or json.loads(meta.read_text()).get("format") != FORMAT:
            return False
    except (OSError, ValueError, AttributeError):
        return False
    ours = {*FILES, META_FILE}
    return all(n in ours or is_working_file(n) for n in os.listdir(folder))


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
    read: Sequence[tuple[str, Any]] = (),
) -> dict[str, Any]:
    """Tokenizes ``inputs`` into the token folder ``out`` (see the module doc); returns its
    ``meta.json``. ``tok`` is ``None`` with ``train_bpe`` (a vocabulary size): the tokenizer is
    then trained on the training share first. Everything is checked and ``out`` claimed
    (checked against the inputs and ``read``, the other files read as ``(flag, path)``;
    created, locked) first; the files are staged and replaced as one set at the end, so a
    failure (or a kill) leaves ``out`` as it was."""
    if (tok is None) == (train_bpe is None):
        raise InputError("give a tokenizer or --train-bpe, not both")
    if train_bpe is not None:
        train_bpe = bpe_train.check_vocab("--train-bpe", train_bpe)
    files = check(inputs, tok, val_fraction=val_fraction, eot=eot, chunk_mb=chunk_mb)
    total = sum(f.stat().st_size for f in files)
    claim = output_folder(
        "--out",
        out,
        what="a token folder",
        tag=TAG,
        names=(*FILES, META_FILE),
        accepts=is_token_folder,
        inputs=[*(("--input", i) for i in inputs), *read],
    )
    with claim as files_out:
        staged = {name: files_out.path(name) for name in (*FILES, META_FILE)}
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
        meta = write_meta(
            files_out.folder,
            tok.vocab_size,
            tok.record,
            source=source,
            text_bytes=total,
            eot=tok.eot,
            files={"train": staged["train.bin"], "val": staged["val.bin"]},
            meta_path=staged[META_FILE],
        )
        files_out.commit()
    return meta


def _trained(
    files: list[pathlib.Path], total: int, val_fraction: float, chunk_mb: float, vocab: Any, progress: bool
) -> Tokenizer:
    """The BPE of :mod:`orthoformer.bpe_train` trained on exactly the pieces that go to
    ``train.bin`` (:func:`~orthoformer.prepare_text.pieces`), loaded as any
    ``tokenizer.json`` is."""
    if progress:
        print(f"training a {vocab}-token BPE on the training share ...", file=sys.stderr, flush=True)
    split_pieces = pieces(files, total, val_fraction, chunk_mb)
    texts = (utf8(piece, path) for split, path, piece, _ in split_pieces if split == "train")
    doc, record = bpe_train.train(texts, vocab)
    tok = from_json(doc, "--train-bpe")
    tok.record = {"kind": "hf", "trained": record}
    return tok


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
            ids = np.asarray(tok.encode(utf8(piece, path)), dtype=np.int64)
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
        type=int_flag(bpe_train.MIN_VOCAB, bpe_train.MAX_VOCAB, bpe_train.VOCAB_HINT),
        help=f"train a byte-level BPE of VOCAB tokens ({bpe_train.MIN_VOCAB}..{bpe_train.MAX_VOCAB}) "
        "on the training share and use it (not with --tokenizer)",
    )
    p.add_argument("--tiktoken-file", help="the tiktoken encoding's ranks file (.tiktoken), for offline use")
    p.add_argument(
        "--val-fraction",
        type=number_flag(0.0, 1.0, lo_open=True, hi_open=True),
        default=0.1,
        help="share of the bytes (the last ones) for val.bin [default: 0.1]",
    )
    p.add_argument("--eot", action="store_true", help="append the end-of-text token after every file")
    p.add_argument(
        "--chunk-mb",
        type=number_flag(0.0, MAX_CHUNK_MB, lo_open=True),
        default=4.0,
        help="text per tokenizer call [default: 4]",
    )
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs prepare; returns the exit status."""
    try:
        # Every flag's type and range is checked by the parser: a bad flag is refused before a
        # tokenizer is loaded (or downloaded).
        args = parser().parse_args(argv)
        vocab = args.train_bpe
        if vocab is not None and (args.tokenizer is not None or args.tiktoken_file is not None):
            raise InputError("--train-bpe trains the tokenizer: leave --tokenizer and --tiktoken-file out")
        input_files(args.input)
        spec = args.tokenizer or "gpt2"
        read = [("--tokenizer", spec)] if vocab is None and is_json_path(spec) else []
        if args.tiktoken_file is not None:
            input_file("--tiktoken-file", args.tiktoken_file)
            if is_json_path(spec):
                raise InputError("--tiktoken-file applies to a tiktoken encoding name, not a tokenizer.json")
            read.append(("--tiktoken-file", args.tiktoken_file))
        # The output against the inputs before a tokenizer is loaded; prepare checks it again.
        check_apart("--out", args.out, [*(("--input", i) for i in args.input), *read])
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
            read=read,
        )
    except (ValueError, OSError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    print(
        json.dumps({k: meta[k] for k in ("dtype", "vocab_size", "train_tokens", "val_tokens", "tokenizer")})
    )
    return 0


__all__ = [
    "FILES",
    "MAX_CHUNK_MB",
    "Tokenizer",
    "check",
    "from_tiktoken",
    "is_token_folder",
    "main",
    "parser",
    "pieces",
    "prepare",
    "tokenizer",
]


if __name__ == "__main__":
    sys.exit(main())
