"""``python -m orthoformer.prepare``: text round-trips exactly through the token files with a
Hugging Face ``tokenizer.json`` (trained here with ``tokenizers``) and with a tiktoken
encoding (made here from explicit ranks: tiktoken's ``gpt2`` files need a download); the
tiktoken encoding converted to a ``tokenizer.json`` gives tiktoken's ids in Python and in
the library; the files are nanoGPT's layout; bad inputs exit 2 with one line."""

from __future__ import annotations

import collections
import json
import re

import numpy as np
import pytest

from conftest import ROOT
from orthoformer import _native, prepare, tiktoken_hf

TEXT = (ROOT / "data" / "tinyshakespeare.txt").read_text()[:60_000]


def hf_tokenizer_json(text: str, vocab: int = 300) -> str:
    """A byte-level BPE ``tokenizer.json`` trained on ``text`` with the tokenizers package."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        pytest.fail("these tests need the tokenizers package (pip install tokenizers)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(text.splitlines(keepends=True), trainer)
    return tok.to_str()


def tiktoken_encoding(text: str, merges: int = 60):
    """A tiktoken ``Encoding`` with GPT-2's pattern over ranks learned here: the 256 bytes,
    then ``merges`` greedy byte-pair merges of ``text``."""
    try:
        import tiktoken
        from tiktoken_ext import openai_public
    except ImportError:
        pytest.fail("these tests need the tiktoken package (pip install tiktoken)")
    ranks = {bytes([b]): b for b in range(256)}
    words = [[bytes([c]) for c in w.encode()] for w in re.findall(r"\S+|\s+", text)]
    for _ in range(merges):
        pairs = collections.Counter(p for w in words for p in zip(w, w[1:]))
        if not pairs:
            break
        (a, b), _ = pairs.most_common(1)[0]
        ranks[a + b] = len(ranks)
        words = [_merge(w, a, b) for w in words]
    specials = {"<|endoftext|>": len(ranks)}
    return tiktoken.Encoding(
        "test-bpe", pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks, special_tokens=specials
    )


def _merge(w: list, a: bytes, b: bytes) -> list:
    out, i = [], 0
    while i < len(w):
        if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(w[i])
            i += 1
    return out


def corpus(tmp_path):
    """A folder of two text files (the second without a final newline) and their text."""
    folder = tmp_path / "text"
    folder.mkdir()
    a, b = TEXT[:40_000], TEXT[40_000:] + "Ünïcödé ✓"
    (folder / "a.txt").write_text(a)
    (folder / "b.txt").write_text(b)
    return folder, a + b


def read_all(out, dtype="uint16") -> np.ndarray:
    # nanoGPT's loader: a raw uint16 memory map of each file.
    return np.concatenate(
        [np.memmap(out / f"{s}.bin", dtype=np.dtype(dtype), mode="r") for s in ("train", "val")]
    )


def test_hugging_face_tokenizer_round_trips_the_text(tmp_path) -> None:
    from tokenizers import Tokenizer

    folder, text = corpus(tmp_path)
    path = tmp_path / "tokenizer.json"
    path.write_text(hf_tokenizer_json(TEXT))
    out = tmp_path / "tokens"
    # Chunks of ~4 KB: the text goes through the tokenizer in many pieces.
    code = prepare.main(
        [
            "--input",
            str(folder),
            "--out",
            str(out),
            "--tokenizer",
            str(path),
            "--chunk-mb",
            "0.004",
            "--quiet",
        ]
    )
    assert code == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == 300 and meta["tokenizer"] == {"kind": "hf"}
    # The last tenth of the bytes is validation (cut at a line end, so about a tenth of the ids).
    assert 0.08 < meta["val_tokens"] / (meta["train_tokens"] + meta["val_tokens"]) < 0.12
    ids = read_all(out)
    assert len(ids) == meta["train_tokens"] + meta["val_tokens"] and ids.max() < 300
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    assert tok.decode(ids.tolist(), skip_special_tokens=False) == text
    native = _native.Tokenizer(json.dumps({"kind": "hf", "json": (out / "tokenizer.json").read_text()}))
    assert native.decode(ids.astype("<u4").tobytes()) == text and native.vocab_size() == 300


def test_tiktoken_encoding_round_trips_and_converts_to_the_same_ids(tmp_path) -> None:
    from tokenizers import Tokenizer

    enc = tiktoken_encoding(TEXT)
    tok = prepare.from_tiktoken(enc)
    folder, text = corpus(tmp_path)
    out = tmp_path / "tokens"
    meta = prepare.prepare([str(folder)], str(out), tok, chunk_mb=0.004, eot=True, progress=False)
    assert meta["tokenizer"] == {"kind": "tiktoken", "name": "test-bpe"} and meta["eot"] == enc.n_vocab - 1
    ids = read_all(out)
    # The ids of each whole file (chunking changes nothing), --eot's id after each.
    eot = meta["eot"]
    assert ids.tolist() == enc.encode_ordinary(text[:40_000]) + [eot] + enc.encode_ordinary(text[40_000:]) + [
        eot
    ]
    assert enc.decode(ids.tolist()) == text[:40_000] + "<|endoftext|>" + text[40_000:] + "<|endoftext|>"
    # The tokenizer.json written beside the ids encodes as tiktoken does, in Python and in Rust.
    sample = TEXT[:5000] + " it's   don't\n\n  3.14159 ✓ "
    want = enc.encode_ordinary(sample)
    assert Tokenizer.from_str(tok.hf_json).encode(sample, add_special_tokens=False).ids == want
    native = _native.Tokenizer(json.dumps({"kind": "tiktoken", "name": "test-bpe", "json": tok.hf_json}))
    assert np.frombuffer(native.encode(sample), "<u4").tolist() == want
    assert native.decode(np.asarray(want, "<u4").tobytes()) == sample and native.name() == "tiktoken:test-bpe"


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--tokenizer", "gpt2", "--tiktoken-file", "RANKS"], "holds 3 tokens, not gpt2's 50256"),
        (["--tokenizer", "cl100k_base", "--tiktoken-file", "RANKS"], "--tiktoken-file works for gpt2"),
        (["--tokenizer", "missing/tokenizer.json"], "not a readable Hugging Face tokenizer.json"),
        (["--tokenizer", "TOK", "--val-fraction", "1.5"], "--val-fraction must be > 0 and < 1, got 1.5"),
    ],
)
def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys, extra, message) -> None:
    ranks = tmp_path / "r.tiktoken"
    ranks.write_text("YQ== 0\nYg== 1\nYw== 2\n")
    tok = tmp_path / "tokenizer.json"
    tok.write_text(hf_tokenizer_json(TEXT[:2000], 260))
    text = tmp_path / "t.txt"
    text.write_text(TEXT[:3000])
    extra = [str(ranks) if x == "RANKS" else str(tok) if x == "TOK" else x for x in extra]
    code = prepare.main(["--input", str(text), "--out", str(tmp_path / "o"), "--quiet", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_the_gpt2_pattern_is_tiktokens_split() -> None:
    """The conversion swaps tiktoken's possessive r50k pattern for GPT-2's original: the
    same pieces on text full of contractions, digits, punctuation and runs of spaces."""
    import regex  # tiktoken's own dependency

    from tiktoken_ext import openai_public

    sample = TEXT[:3000] + " I'll  they've 12345 ?!  \n\n\t x"
    assert regex.findall(tiktoken_hf.GPT2_PATTERN, sample) == regex.findall(
        openai_public.r50k_pat_str, sample
    )
