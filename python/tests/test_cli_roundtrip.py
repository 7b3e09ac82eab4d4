"""A model trained in PyTorch and saved by ``GPT.save_checkpoint`` works in the command line:
``orthoformer eval`` computes the loss PyTorch computes, ``generate`` continues a prompt and
``theory`` measures it; ``orthoformer train --resume`` continues it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from orthoformer import Data
from orthoformer.torch import GPT
from helpers import small_config


@pytest.fixture(scope="module")
def torch_checkpoint(tmp_path_factory):
    """A post-LN orthogonal model trained 5 steps in plain PyTorch, saved with its optimizer."""
    out = tmp_path_factory.mktemp("torch") / "ckpt"
    data = Data(context=16)
    model = GPT(small_config("orthogonal", "post"), seed=7)
    decay, rest = model.decay_groups()
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=1e-2,
        betas=(0.9, 0.95),
    )
    train = data.tokens("train")
    rng = np.random.default_rng(0)
    for _ in range(5):
        starts = rng.integers(0, len(train) - 17, size=4)
        x = torch.from_numpy(np.stack([train[s : s + 16] for s in starts]))
        y = torch.from_numpy(np.stack([train[s + 1 : s + 17] for s in starts]))
        opt.zero_grad()
        model(x, y)[1].backward()
        opt.step()
    options = {**__import__("orthoformer").data.DEFAULTS["options"], "batch": 4, "steps": 5}
    model.save_checkpoint(out, data=data, options=options, step=5, optimizer=opt)
    return out, model, data


def test_eval_gives_the_pytorch_loss(cli_json, torch_checkpoint) -> None:
    out, model, data = torch_checkpoint
    report = cli_json("eval", "--checkpoint", out, "--eval-iters", 2)["report"]
    # The same windows: consecutive, non-overlapping, of the validation split, 4 per batch.
    val = data.tokens("val")
    windows = [val[w * 16 : w * 16 + 17] for w in range(8)]
    x = torch.from_numpy(np.stack([w[:16] for w in windows]))
    y = torch.from_numpy(np.stack([w[1:] for w in windows]))
    model.eval()
    with torch.no_grad():
        loss = float(model(x, y)[1])
    assert report["tokens"] == 8 * 16
    assert report["loss"] == pytest.approx(loss, abs=1e-5)


def test_generate_continues_the_prompt(cli, torch_checkpoint) -> None:
    out, _, _ = torch_checkpoint
    p = cli("generate", "--checkpoint", out, "--prompt", "ROMEO:", "--max-new-tokens", 20, "--seed", 1)
    text = p.stdout.rstrip("\n")
    assert text.startswith("ROMEO:") and len(text) == len("ROMEO:") + 20


def test_theory_measures_it(cli_json, torch_checkpoint, tmp_path) -> None:
    out, _, _ = torch_checkpoint
    r = cli_json("theory", "--checkpoint", out, "--tokens", 16, "--out", tmp_path)
    assert r["attention"] == "orthogonal" and r["d_model"] == 16 and len(r["heads"]) > 0


def test_cli_resumes_a_pytorch_checkpoint(cli_json, torch_checkpoint, tmp_path) -> None:
    import shutil

    out, _, _ = torch_checkpoint
    run = tmp_path / "resumed"
    shutil.copytree(out, run)
    r = cli_json("train", "--out", run, "--resume", "--steps", 7)
    assert r["step"] == 7
