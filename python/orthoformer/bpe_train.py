"""A byte-level BPE trained on the training share of a corpus, for ``python -m
orthoformer.prepare --train-bpe VOCAB``.

The model is GPT-2's kind: the ``tokenizers`` package's ``ByteLevel`` pre-tokenizer (GPT-2's
regex split, bytes mapped to printable characters, no prefix space) and decoder, all 256
bytes in the initial alphabet (so any text encodes, seen or not), and one special token,
``<|endoftext|>``, id 0. Its merges are learned from the **training share only**: the
pieces prepare writes to ``train.bin`` (the first ``1 - --val-fraction`` of the bytes, cut
where prepare cuts), so no validation byte shapes the vocabulary.

Training is deterministic: the trainer counts words exactly and breaks ties between equally
frequent pairs by the pair itself, and ``to_str`` writes the vocabulary in id order, so the
same text gives the same ``tokenizer.json`` bytes in every process (a test checks it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

from .validate import integer

#: The special token, GPT-2's spelling.
EOT = "<|endoftext|>"
#: Smallest vocabulary: the 256 bytes and ``EOT``; a BPE never drops its byte alphabet.
MIN_VOCAB = 257
#: Largest vocabulary: ids fit ``uint16`` (nanoGPT's ``train.bin`` dtype).
MAX_VOCAB = 65536


#: What a bad vocabulary size is told.
VOCAB_HINT = "the 256 bytes and <|endoftext|> need 257; the ladder uses 8192"


def check_vocab(flag: str, vocab: Any) -> int:
    """``vocab`` as an int in ``MIN_VOCAB ..= MAX_VOCAB``, or an ``InputError`` naming ``flag``."""
    return integer(
        flag,
        vocab,
        lo=MIN_VOCAB,
        hi=MAX_VOCAB,
        hint=VOCAB_HINT,
    )


class _Hashed:
    """The training texts passed through while their UTF-8 bytes are hashed and counted."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts, self.digest, self.bytes = texts, hashlib.sha256(), 0

    def __iter__(self) -> Iterator[str]:
        for t in self.texts:
            raw = t.encode("utf-8")
            self.digest.update(raw)
            self.bytes += len(raw)
            yield t


def train(texts: Iterable[str], vocab: int) -> tuple[str, dict[str, Any]]:
    """Trains the BPE (module doc) on ``texts`` (pieces cut where prepare cuts: at line ends
    that GPT-2's split never joins across, so the pieces give the words of the whole text).
    Returns the ``tokenizer.json`` text and the record ``meta.json`` keeps under
    ``tokenizer.trained``: the vocabulary asked for and got, the training bytes and their
    SHA-256, and the ``tokenizers`` version."""
    vocab = check_vocab("--train-bpe", vocab)
    try:
        import tokenizers
        from tokenizers import decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise ValueError("--train-bpe needs the tokenizers package: pip install tokenizers") from None
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hashed = _Hashed(texts)
    tok.train_from_iterator(hashed, trainer)
    if hashed.bytes == 0:
        raise ValueError("--train-bpe: the training share is empty: give more text")
    record = {
        "vocab": vocab,
        "vocab_size": tok.get_vocab_size(True),
        "train_bytes": hashed.bytes,
        "train_sha256": hashed.digest.hexdigest(),
        "model": "byte-level BPE: GPT-2 ByteLevel pre-tokenizer and decoder, no prefix space",
        "special": [EOT],
        "tokenizers": tokenizers.__version__,
    }
    return tok.to_str(), record
