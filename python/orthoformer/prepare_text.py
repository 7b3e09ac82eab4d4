"""The text side of ``python -m orthoformer.prepare``: the input files, read in chunks cut
where a tokenizer's pieces never join, and the split of their bytes into the training and
validation shares.

The split rule: the first ``round(total * (1 - val_fraction))`` bytes (files in sorted order)
are the training share, the rest the validation share. The cut moves back to a line end (a
newline with text on both sides, where chunks are cut) when one lies within
:func:`slack` bytes before it, so that usually both shares tokenize as the whole text would;
otherwise it stays at the byte (moved back to the start of the character it falls in). So the
validation share is the fraction asked for, to within 0.1% of the text.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator, Sequence

from .validate import InputError

_SPACE = frozenset(b" \t\n\r\x0b\x0c")
#: Most bytes the split may move back to reach a line end.
MAX_SLACK = 1 << 16


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
    ``chunk_bytes`` cut after a line end (see :func:`cut_point`)."""
    for path in files:
        with open(path, "rb") as f:
            pending = b""
            while True:
                block = f.read(chunk_bytes)
                data = pending + block
                if not block:
                    yield path, data, True
                    break
                cut = cut_point(data)
                if cut == 0:
                    pending = data
                    continue
                pending = data[cut:]
                yield path, data[:cut], False


def cut_point(data: bytes) -> int:
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


def slack(total: int) -> int:
    """Bytes the split may move back to a line end: 0.1% of the text, at most 64 KiB."""
    return min(MAX_SLACK, total // 1000)


def split_at(data: bytes, k: int, room: int) -> int:
    """Where to cut ``data`` for the split byte ``k`` (``0 <= k <= len(data)``): the line end
    at most ``room`` bytes before it, else ``k`` moved back to a character's first byte."""
    line = cut_point(data[: k + 1])
    if line > 0 and k - line <= room:
        return line
    while 0 < k < len(data) and data[k] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        k -= 1
    return k


def utf8(data: bytes, path: pathlib.Path) -> str:
    """``data`` as text, or an error naming ``path``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{path} is not UTF-8 text (byte {e.start} of a chunk): convert it or leave it out"
        ) from None


def pieces(
    files: list[pathlib.Path], total: int, val_fraction: float, chunk_mb: float
) -> Iterator[tuple[str, pathlib.Path, bytes, bool]]:
    """``(split, file, bytes, last piece of the file)`` in order: the text in chunks (see
    :func:`chunks`), the chunk holding the split byte cut there (the module doc's rule). The
    BPE trainer and the tokenizer read the same pieces."""
    cut = round(total * (1.0 - val_fraction))
    room = slack(total)
    done, split = 0, "train"
    for path, data, last in chunks(files, max(1, int(chunk_mb * 2**20))):
        parts = [(data, last)]
        if split == "train" and done + len(data) > cut:
            k = split_at(data, cut - done, room)
            parts = [(data[:k], False), (data[k:], last)]
            if k == 0:
                split = "val"
                parts = parts[1:]
        for i, (piece, end) in enumerate(parts):
            if i == 1:
                split = "val"
            if piece or end:
                yield split, path, piece, end
            done += len(piece)
        if split == "train" and done >= cut:
            split = "val"


__all__ = ["chunks", "cut_point", "input_files", "pieces", "slack", "split_at", "utf8"]
