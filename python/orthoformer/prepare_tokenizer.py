"""The tokenizers of ``python -m orthoformer.prepare``: a tiktoken encoding by name, any
Hugging Face ``tokenizer.json``, or the BPE ``--train-bpe`` trains, as one
:class:`Tokenizer`. Its vocabulary is checked on loading: every id it can produce lies below
the vocabulary size ``meta.json`` will declare, or it is refused by name (a vocabulary with
gaps would let the token files hold ids a model of that size cannot embed)."""

from __future__ import annotations

import os
import pathlib
from typing import Any, Callable, Optional

from . import tiktoken_hf
from .validate import InputError


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


def is_json_path(spec: str) -> bool:
    """Whether ``--tokenizer`` names a ``tokenizer.json`` file rather than a tiktoken name."""
    return spec.endswith(".json") or os.path.isfile(spec)


def tokenizer(spec: str, tiktoken_file: Optional[str] = None) -> Tokenizer:
    """``spec``: a path to a Hugging Face ``tokenizer.json``, or a tiktoken encoding name
    (``tiktoken_file``: its ranks, offline)."""
    if is_json_path(spec):
        return _hf(spec)
    return from_tiktoken(tiktoken_hf.load(spec, tiktoken_file))


def from_tiktoken(enc: Any) -> Tokenizer:
    """A tiktoken ``Encoding`` (its ordinary text: special tokens are not parsed from text);
    its vocabulary is ``n_vocab``, one past its largest id."""
    doc = tiktoken_hf.to_hf_json(enc)
    eot = enc._special_tokens.get("<|endoftext|>")
    return Tokenizer(enc.encode_ordinary, enc.n_vocab, eot, {"kind": "tiktoken", "name": enc.name}, doc)


def _hf(path: str) -> Tokenizer:
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--tokenizer {path}: not a readable Hugging Face tokenizer.json ({e})") from None
    return from_json(text, f"--tokenizer {path}")


def from_json(text: str, shown: str) -> Tokenizer:
    """A ``tokenizer.json`` text (``shown`` names it in errors) as prepare's tokenizer."""
    try:
        import tokenizers
    except ImportError:
        raise InputError("a tokenizer.json needs the tokenizers package: pip install tokenizers") from None
    try:
        tok = tokenizers.Tokenizer.from_str(text)
    except Exception as e:  # the tokenizers package's own exception type
        raise InputError(f"{shown}: not a readable Hugging Face tokenizer.json ({e})") from None
    size = tok.get_vocab_size(True)
    vocab = tok.get_vocab(with_added_tokens=True)
    if vocab:
        name, top = max(vocab.items(), key=lambda kv: kv[1])
        if top >= size:
            raise InputError(
                f"{shown}: token {name[:40]!r} has id {top}, not below the vocabulary size {size} "
                "(its ids have gaps), so the token files could hold ids beyond meta.json's "
                "vocab_size: number the vocabulary 0..N-1 or use another tokenizer.json"
            )
    eot = None
    for special in ("<|endoftext|>", "</s>", "<|im_end|>"):
        eot = tok.token_to_id(special)
        if eot is not None:
            break
    return Tokenizer(lambda s: tok.encode(s, add_special_tokens=False).ids, size, eot, {"kind": "hf"}, text)


__all__ = ["Tokenizer", "from_json", "from_tiktoken", "is_json_path", "tokenizer"]
