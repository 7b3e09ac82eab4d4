"""The two trainers on one token folder: ``orthoformer train --data DIR`` draws the
batch windows and evaluation batches ``python -m orthoformer.train --data-dir DIR`` draws
(NumPy's generator, ported to the library bit for bit), so the two engines train the same
model on the same batches to the same weights (within float rounding), and each continues
the other's checkpoint."""

from __future__ import annotations

import orthoformer
import pytest
from test_train import max_diff, read_metrics, train
from test_train_tokens import hf_folder  # noqa: F401  (a fixture)

RUN = ["--context", 16, "--steps", 12, "--lr", 1e-2, "--warmup", 2, "--eval-every", 6]
RUN += ["--eval-iters", 2, "--seed", 7, "--batch", 4, "--attention", "orthogonal"]


@pytest.fixture
def tiny(tmp_path):
    """The ``tiny`` preset without attention biases (see test_train's ``tiny``)."""
    cfg = orthoformer.GPTConfig.preset("tiny")
    cfg.attn_bias = False
    path = tmp_path / "tiny.json"
    path.write_text(cfg.to_json())
    return ["--config", path]


def test_both_engines_train_a_token_folder_alike(cli, tmp_path, tiny, hf_folder) -> None:  # noqa: F811
    rust, py = tmp_path / "rust", tmp_path / "py"
    cli("train", *tiny, *RUN, "--data", hf_folder, "--out", rust)
    train(*tiny, *RUN, "--data-dir", hf_folder, "--device", "cpu", "--out", py)
    a, b = orthoformer.load_checkpoint(rust), orthoformer.load_checkpoint(py)
    assert a.state["data"] == b.state["data"]
    assert a.state["sampler_word_pos"] == b.state["sampler_word_pos"] == "12"
    assert max_diff(a.params, b.params) < 1e-4
    ma, mb = (read_metrics(r) for r in (rust, py))
    assert [m["step"] for m in ma] == [m["step"] for m in mb] == [0, 6, 12]
    for ra, rb in zip(ma, mb):
        # The same evaluation batches: equal losses at step 0, close after.
        assert ra["train_loss"] == pytest.approx(rb["train_loss"], abs=1e-4)
        assert ra["val_loss"] == pytest.approx(rb["val_loss"], abs=1e-4)
    # Each engine continues the other's checkpoint on the batches that come next.
    cli("train", "--out", py, "--resume", "--steps", 16)
    train("--out", rust, "--resume", "--steps", 16, "--device", "cpu")
    a, b = orthoformer.load_checkpoint(rust), orthoformer.load_checkpoint(py)
    assert a.step == b.step == 16
    assert a.state["sampler_word_pos"] == b.state["sampler_word_pos"] == "16"
    assert max_diff(a.params, b.params) < 1e-4
