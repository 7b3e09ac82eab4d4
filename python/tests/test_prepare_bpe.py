"""``python -m orthoformer.prepare --train-bpe VOCAB``: the BPE is the
same bytes in every run and every process, it is trained on the training share alone (a word
found only in the validation share stays in pieces; the same word in the training share
becomes one token, so the check can fail), ``meta.json`` records how it was made, and bad
flags exit 2 with one line."""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import ROOT, python_module
from orthoformer import prepare

TEXT = (ROOT / "data" / "tinyshakespeare.txt").read_text()[:80_000]
#: A word in neither TinyShakespeare nor English; repeated enough to be merged whole when seen.
WORD = "zyxquvorb"


def _corpus(tmp_path, word_in: str):
    """A text whose last tenth (the validation share at the returned fraction) repeats
    ``WORD`` (``word_in="val"``), or whose training part starts with it (``"train"``), or
    neither; returns its path, the training part and the validation fraction."""
    filler = "".join(f"the {WORD} said so.\n" for _ in range(400))
    train = filler + TEXT if word_in == "train" else TEXT
    val = filler if word_in == "val" else TEXT[: len(filler)]
    path = tmp_path / f"text-{word_in}.txt"
    path.write_text(train + val)
    return path, train, len(val) / len(train + val)


def _run(tmp_path, text, name: str, *extra: str) -> tuple[int, str]:
    out = tmp_path / name
    code = prepare.main(["--input", str(text), "--out", str(out), "--quiet", *extra])
    return code, out


def _tokenizer(folder):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def test_the_bpe_is_the_same_bytes_in_every_run_and_process(tmp_path) -> None:
    text, _, _ = _corpus(tmp_path, "none")
    code_a, a = _run(tmp_path, text, "a", "--train-bpe", "600")
    code_b, b = _run(tmp_path, text, "b", "--train-bpe", "600")
    p = python_module(
        "orthoformer.prepare", "--input", text, "--out", tmp_path / "c", "--train-bpe", "600", "--quiet"
    )
    assert (code_a, code_b, p.returncode) == (0, 0, 0), p.stderr
    for name in ("tokenizer.json", "train.bin", "val.bin"):
        first = (a / name).read_bytes()
        assert first == (b / name).read_bytes() == (tmp_path / "c" / name).read_bytes(), name
    meta = json.loads((a / "meta.json").read_text())
    assert meta["vocab_size"] == 600 and _tokenizer(a).get_vocab_size() == 600
    assert _tokenizer(a).token_to_id("<|endoftext|>") == 0 == meta["eot"]
    # The ids decode to the text: every byte is in the alphabet, seen or not.
    import numpy as np

    ids = np.concatenate([np.fromfile(a / f"{s}.bin", dtype="<u2") for s in ("train", "val")])
    assert _tokenizer(a).decode(ids.tolist()) == text.read_text()


def test_the_bpe_never_sees_the_validation_share(tmp_path) -> None:
    for where, whole in (("val", False), ("train", True)):
        text, train, fraction = _corpus(tmp_path, where)
        code, out = _run(
            tmp_path, text, f"out-{where}", "--train-bpe", "700", "--val-fraction", f"{fraction:.6f}"
        )
        assert code == 0
        ids = _tokenizer(out).encode(f" {WORD}").ids
        # Seen 400 times in training: one token. Only in the validation share: pieces.
        assert (len(ids) == 1) == whole, (where, ids)
        trained = json.loads((out / "meta.json").read_text())["tokenizer"]["trained"]
        raw = text.read_bytes()
        # The tokenizer's training bytes are the start of the text, no further than the split.
        assert trained["vocab"] == 700 and 0 < trained["train_bytes"] <= len(train.encode())
        assert trained["train_sha256"] == hashlib.sha256(raw[: trained["train_bytes"]]).hexdigest()
        assert WORD.encode() not in raw[: trained["train_bytes"]] or where == "train"


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--train-bpe", "8192", "--tokenizer", "gpt2"], "leave --tokenizer and --tiktoken-file out"),
        (["--train-bpe", "8192", "--tiktoken-file", "x"], "leave --tokenizer and --tiktoken-file out"),
        (["--train-bpe", "256"], "--train-bpe must be from 257 to 65536, got 256"),
        (["--train-bpe", "65537"], "--train-bpe must be from 257 to 65536, got 65537"),
        (["--train-bpe", "8k"], "--train-bpe must be an integer, got '8k'"),
        (["--train-bpe", "300", "--val-fraction", "0"], "--val-fraction must be > 0 and < 1, got 0"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, extra, message) -> None:
    text = tmp_path / "t.txt"
    text.write_text(TEXT[:3000])
    code, out = _run(tmp_path, text, "o", *extra)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
