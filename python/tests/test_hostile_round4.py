"""Round four's hostile campaign on ``python -m orthoformer.interpolate``: a model B folder
with a damaged, special or different file beside a good model A. Each case exits 2 with one
line naming what was wrong, and ends promptly (a FIFO must not block it: each case runs under
an alarm)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from typing import Callable

import pytest

from orthoformer import interpolate
from helpers import tiny_bpe_llama_folder


def _truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _fifo(path) -> None:
    path.unlink()
    os.mkfifo(path)


def _folder(path) -> None:
    path.unlink()
    path.mkdir()


def _edit_tokenizer(edit: Callable[[dict], None]) -> Callable:
    def apply(b) -> None:
        tok = json.loads((b / "tokenizer.json").read_text())
        edit(tok)
        (b / "tokenizer.json").write_text(json.dumps(tok))

    return apply


def _edit_config(edit: Callable[[dict], None]) -> Callable:
    def apply(b) -> None:
        cfg = json.loads((b / "config.json").read_text())
        edit(cfg)
        (b / "config.json").write_text(json.dumps(cfg))

    return apply


CASES = [
    ("tokenizer.json a FIFO", lambda b: _fifo(b / "tokenizer.json"), "tokenizer.json"),
    ("tokenizer.json missing", lambda b: (b / "tokenizer.json").unlink(), "tokenizer.json"),
    ("tokenizer.json truncated", lambda b: _truncate(b / "tokenizer.json"), "tokenizer.json"),
    ("tokenizer.json a folder", lambda b: _folder(b / "tokenizer.json"), "tokenizer.json"),
    ("tokenizer.json an array", lambda b: (b / "tokenizer.json").write_text("[]"), "tokenizer.json"),
    ("config.json truncated", lambda b: _truncate(b / "config.json"), "config.json"),
    ("config.json a FIFO", lambda b: _fifo(b / "config.json"), "config.json"),
    ("model.safetensors truncated", lambda b: _truncate(b / "model.safetensors"), "model.safetensors"),
    ("model.safetensors a FIFO", lambda b: _fifo(b / "model.safetensors"), "model.safetensors"),
    (
        "a merge left out",
        _edit_tokenizer(lambda t: t["model"]["merges"].pop()),
        "tokenizer.json's model differs",
    ),
    (
        "a lowercasing normalizer",
        _edit_tokenizer(lambda t: t.__setitem__("normalizer", {"type": "Lowercase"})),
        "tokenizer.json's normalizer differs",
    ),
    ("another rms_norm_eps", _edit_config(lambda c: c.__setitem__("rms_norm_eps", 1e-3)), "rms_norm_eps"),
    (
        "another depth",
        _edit_config(lambda c: c.__setitem__("num_hidden_layers", 1)),
        "num_hidden_layers",
    ),
]


@pytest.fixture(scope="module")
def model_a(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("round4")
    a, _ = tiny_bpe_llama_folder(tmp)
    return a, tmp / "t.txt"


class Hung(BaseException):
    """A case that did not end in time (not an ``OSError``, which the tool would report)."""


def _alarm(signum, frame):
    raise Hung("the case did not end within 20 s")


@pytest.mark.parametrize("name,damage,want", CASES, ids=[c[0] for c in CASES])
def test_interpolate_refuses_a_model_b_that_is_not_comparable(
    name, damage, want, model_a, tmp_path, capsys
) -> None:
    a, text = model_a
    b = tmp_path / "b"
    shutil.copytree(a, b)
    damage(b)
    capsys.readouterr()
    argv = ["--model", str(a), "--model-b", str(b), "--data", str(text), "--tokens", "256", "--context", "32"]
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        code = interpolate.main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err.strip()
    assert code == 2, (name, err)
    assert len(err.splitlines()) == 1 and want in err, (name, err)
    assert "Traceback" not in err


def test_interpolate_refuses_data_that_is_a_fifo(model_a, tmp_path, capsys) -> None:
    a, _ = model_a
    fifo = tmp_path / "text.fifo"
    os.mkfifo(fifo)
    capsys.readouterr()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        code = interpolate.main(["--model", str(a), "--model-b", str(a), "--data", str(fifo)])
    finally:
        signal.alarm(0)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--data" in err, err
