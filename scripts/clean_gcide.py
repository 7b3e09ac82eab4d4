"""GCIDE's dictd files (``gcide.dict`` uncompressed, ``gcide.index``) to plain text, the
corpus ``scripts/fetch_gcide.sh`` writes and ``docs/DATA.md`` describes.

    python3 scripts/clean_gcide.py gcide.dict gcide.index out.txt

The rules, applied in this order and nothing else (so the output is a function of the input
bytes alone):

1. Drop the dictd header entries: every byte range the index gives for a headword starting
   with ``00-database-`` (the database's URL, short and long names and info, which repeats
   the licence notice). The ``00-gcide-*`` and ``00-web1913-*`` headwords point at the same
   ranges.
2. Strip the leading spaces and tabs of every line (dictd indents entry bodies by 3 spaces
   and sub-senses by 6; the indentation carries no text).
3. Drop the lines that are only a source tag: ``[`` + source names joined by ``+``, ``&``,
   commas or spaces + ``]``, e.g. ``[1913 Webster]``, ``[PJC]``, ``[WordNet 1.5 +PJC]``.
   The names are those listed in ``SOURCE`` below. Usage labels on a line of their own
   (``[Obs.]``, ``[Colloq.]``) and etymologies in brackets are text and stay.

Everything else is kept, blank lines included. The text is ASCII but for three bytes in
Windows-1252 (``’`` 0x92, ``ç`` 0xE7, and 0xB9, ``¹``, where an apostrophe was meant); it is
read as Windows-1252 and written as UTF-8, so those three become two-byte characters.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys

#: dictd's base64 digits for offsets and lengths in ``.index`` files (not RFC 4648's padding
#: form: a plain big-endian number in base 64).
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
SOURCE = (
    r"(?:1913 Webster|Webster 1913 Suppl\.|WordNet \d\.\d|WordNet sense \d+(?:\s*[&+]\s*\d+)*"
    r"|Century Dict\.,? 1906\.?|PJC\.?|AS|RDH|GG|RP|CM|MW10|PC)"
)
SOURCE_LINE = re.compile(rf"\[{SOURCE}(?:[\s,&+]*{SOURCE})*\s*\]\n?")


def b64(digits: str) -> int:
    """A dictd base64 number."""
    value = 0
    for c in digits:
        value = value * 64 + B64.index(c)
    return value


def header_ranges(index: str) -> list[tuple[int, int]]:
    """``(start, end)`` byte ranges of the ``00-database-*`` entries, sorted, merged."""
    ranges = set()
    for line in index.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0].startswith("00-database-"):
            start = b64(fields[1])
            ranges.add((start, start + b64(fields[2])))
    if not ranges:
        sys.exit("clean_gcide: the index has no 00-database-* entries: is it gcide.index?")
    return sorted(ranges)


def clean(data: bytes, index: str) -> bytes:
    """The cleaned corpus (rules in the module doc)."""
    kept, at = [], 0
    for start, end in header_ranges(index):
        if start < at or end > len(data):
            sys.exit(f"clean_gcide: header entry {start}..{end} overlaps or runs past the data")
        kept.append(data[at:start])
        at = end
    kept.append(data[at:])
    try:
        text = b"".join(kept).decode("cp1252")
    except UnicodeDecodeError as e:
        sys.exit(f"clean_gcide: byte {e.start} is not Windows-1252: is this gcide.dict?")
    out = []
    for line in text.splitlines(keepends=True):
        line = line.lstrip(" \t")
        if not SOURCE_LINE.fullmatch(line):
            out.append(line)
    return "".join(out).encode("utf-8")


def main(argv: list[str]) -> int:
    """Cleans; writes the output atomically and prints its bytes and SHA-256."""
    if len(argv) != 3:
        sys.exit("usage: clean_gcide.py GCIDE.DICT GCIDE.INDEX OUT.TXT")
    with open(argv[0], "rb") as f:
        data = f.read()
    with open(argv[1], encoding="utf-8") as f:
        index = f.read()
    text = clean(data, index)
    tmp = argv[2] + ".tmp"
    with open(tmp, "wb") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, argv[2])
    print(f"{argv[2]}: {len(text)} bytes, sha256 {hashlib.sha256(text).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
