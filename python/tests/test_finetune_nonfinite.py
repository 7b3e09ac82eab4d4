"""No wrong result accepted: ``orthoformer.finetune`` printed a NaN validation loss
and exited 0. A non-finite loss, training or validation, now stops the mode with
``TrainingStopped`` (one line, exit 2 from the command line), as it stops ``orthoformer
train`` and ``python -m orthoformer.train``."""

from __future__ import annotations

import pytest
import torch

from conftest import python_module
from orthoformer import finetune as ft
from orthoformer.errors import TrainingStopped
from test_finetune import TEXT, VOCAB, hf_tokenizer_json, tiny_llama, tokens

KW = dict(steps=4, context=16, batch=2, warmup=1, val_windows_n=2)


def poisoned() -> torch.nn.Module:
    """The tiny Llama with one NaN weight: every loss it gives is NaN."""
    model = tiny_llama()
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight[0, 0] = float("nan")
    return model


def test_a_nan_model_is_refused_before_training() -> None:
    train, val = tokens()
    with pytest.raises(TrainingStopped, match="validation loss of mode full is nan before training"):
        ft.finetune(poisoned(), train, val, "full", lr=1e-3, **KW)


def test_a_loss_that_becomes_non_finite_stops_the_mode() -> None:
    train, val = tokens()
    # A rate of 1e30 throws the weights to ~1e30 at the first step: the logits overflow.
    with pytest.raises(TrainingStopped, match=r"loss of mode qk-pretrained became (nan|inf) at step \d"):
        ft.finetune(tiny_llama(), train, val, "qk-pretrained", lr=1e30, **KW)


def test_the_command_line_exits_2_with_one_line(tmp_path) -> None:
    folder = tmp_path / "hf"
    poisoned().save_pretrained(folder)
    (folder / "tokenizer.json").write_text(hf_tokenizer_json(TEXT[:20_000], vocab=VOCAB))
    text = tmp_path / "text.txt"
    text.write_text(TEXT[:20_000])
    out = tmp_path / "report.json"
    args = ["--model", folder, "--data", text, "--modes", "full", "--steps", 2, "--context", 16]
    p = python_module("orthoformer.finetune", *args, "--batch", 2, "--out", out)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "is nan before training" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not out.exists()
