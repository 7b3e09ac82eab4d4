"""tiktoken encodings for ``python -m orthoformer.prepare``: loading one by name (tiktoken
downloads its files at first use) or from a local ranks file (offline), and the same
tokenizer written as a Hugging Face ``tokenizer.json``, which the checkpoint stores so that
``orthoformer generate`` and ``eval`` (the Rust library, which runs Hugging Face tokenizers)
encode and decode exactly as tiktoken does.

The conversion is byte-level BPE as GPT-2 defined it: every token's bytes spelled with GPT-2's
byte-to-character table, and for every token of rank ``r`` the merges of two tokens that make
it, at priority ``r``; tiktoken merges the adjacent pair whose result has the lowest rank,
which is what this merge order makes the Hugging Face BPE do.
"""

from __future__ import annotations

import json
import os
from typing import Any

# GPT-2's pre-tokenisation regex as first published; tiktoken's r50k pattern is the same
# split written with possessive quantifiers for speed.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
#: Encodings whose pattern and special tokens are known here, so a local ranks file suffices.
LOCAL_ENCODINGS = {"gpt2": 50257, "r50k_base": 50257, "p50k_base": 50281}
HOW_TO_GET = (
    'on a machine with network run python -c "import tiktoken; from tiktoken.load import '
    "dump_tiktoken_bpe; dump_tiktoken_bpe(tiktoken.get_encoding('gpt2')._mergeable_ranks, "
    "'gpt2.tiktoken')\" and pass --tiktoken-file gpt2.tiktoken (or copy tiktoken's cache folder "
    "and set TIKTOKEN_CACHE_DIR to it)"
)


def _tiktoken() -> Any:
    try:
        import tiktoken
    except ImportError:
        raise ValueError("the tiktoken tokenizers need the tiktoken package: pip install tiktoken") from None
    return tiktoken


def load(name: str, ranks_file: str | None = None) -> Any:
    """The tiktoken ``Encoding`` ``name``; from ``ranks_file`` (tiktoken's ``.tiktoken``
    format: base64 token, rank) when given, else tiktoken's own loader (network at first use)."""
    tiktoken = _tiktoken()
    if ranks_file is None:
        try:
            return tiktoken.get_encoding(name)
        except ValueError as e:
            raise ValueError(f"tiktoken encoding {name!r}: {e}") from None
        except Exception as e:  # requests' errors when offline
            raise ValueError(
                f"tiktoken could not load the {name} encoding ({type(e).__name__}); {HOW_TO_GET}"
            ) from None
    if name not in LOCAL_ENCODINGS:
        raise ValueError(
            f"--tiktoken-file works for {', '.join(LOCAL_ENCODINGS)} (their pattern is known here); "
            f"{name} needs tiktoken's own loader"
        )
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext import openai_public

    if not os.path.isfile(ranks_file):
        raise ValueError(f"--tiktoken-file {ranks_file}: no such file; {HOW_TO_GET}")
    try:
        ranks = load_tiktoken_bpe(ranks_file)
    except Exception as e:  # binascii/ValueError on a bad line, UnicodeDecodeError, OSError
        raise ValueError(
            f"--tiktoken-file {ranks_file}: not a tiktoken ranks file ({type(e).__name__}: {e}); {HOW_TO_GET}"
        ) from None
    # The ranks are the token ids: they must be 0 .. n-1, each once, or the converted
    # tokenizer.json and meta.json's vocabulary would disagree with the ids written.
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ValueError(f"--tiktoken-file {ranks_file}: the ranks are not 0 .. {len(ranks) - 1}, each once")
    specials = {openai_public.ENDOFTEXT: 50256}
    if name == "p50k_base" and len(ranks) != 50280:
        raise ValueError(f"{ranks_file} holds {len(ranks)} tokens, not p50k_base's 50280")
    if name != "p50k_base" and len(ranks) != 50256:
        raise ValueError(f"{ranks_file} holds {len(ranks)} tokens, not {name}'s 50256: {HOW_TO_GET}")
    return tiktoken.Encoding(
        name, pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks, special_tokens=specials
    )


def _byte_chars() -> dict[int, str]:
    """GPT-2's table from bytes to printable characters (byte-level BPE's alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def to_hf_json(enc: Any) -> str:
    """The ``tokenizer.json`` document of the tiktoken encoding ``enc`` (same ids)."""
    ranks: dict[bytes, int] = enc._mergeable_ranks
    table = _byte_chars()

    def spell(b: bytes) -> str:
        return "".join(table[x] for x in b)

    vocab = {spell(tok): rank for tok, rank in ranks.items()}
    merges = []
    for tok, rank in ranks.items():
        for i in range(1, len(tok)):
            a, b = tok[:i], tok[i:]
            if a in ranks and b in ranks:
                merges.append((rank, ranks[a], ranks[b], spell(a), spell(b)))
    merges.sort()
    pattern = GPT2_PATTERN if enc._pat_str == _r50k_pattern() else enc._pat_str
    added = [
        {
            "id": i,
            "content": s,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for s, i in sorted(enc._special_tokens.items(), key=lambda kv: kv[1])
    ]
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[a, b] for *_, a, b in merges],
        },
    }
    return json.dumps(doc, ensure_ascii=False)


def _r50k_pattern() -> str:
    from tiktoken_ext import openai_public

    return openai_public.r50k_pat_str
