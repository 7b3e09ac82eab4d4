"""Checkpoint folders through the library: a CLI checkpoint reads back verified (state,
weights, moments), a folder written from Python is one the command line accepts, and a
damaged folder is an exception, never a crash."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import orthoformer
from orthoformer import Data, load_checkpoint, save_checkpoint
from helpers import cli_train, small_config


def test_reads_a_cli_checkpoint(cli, tmp_path) -> None:
    run = cli_train(cli, tmp_path, small_config("orthogonal"), steps=4)
    ckpt = load_checkpoint(run)
    assert ckpt.step == 4 and ckpt.state["options"]["batch"] == 4
    assert ckpt.config.attention == "orthogonal"
    assert set(ckpt.params) == {row[0] for row in ckpt.model.table}
    assert set(ckpt.frozen) == {f"h.{layer}.attn.{w}.weight" for layer in range(2) for w in "qk"}
    assert ckpt.state["adam_t"] == 4 and np.abs(ckpt.adam_v["wte"]).max() > 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert ckpt.state["tokenizer"]["kind"] == "char" and len(metrics) == 2


def test_python_written_checkpoint_evaluates_like_the_original(cli_json, cli, tmp_path) -> None:
    run = cli_train(cli, tmp_path, small_config("orthogonal-tied", "post"), steps=4)
    ckpt = load_checkpoint(run)
    copy = tmp_path / "copy"
    save_checkpoint(
        copy,
        ckpt.config,
        ckpt.params,
        frozen=ckpt.frozen,
        data=Data(context=16),
        options=ckpt.state["options"],
        step=ckpt.step,
        adam=(ckpt.adam_m, ckpt.adam_v, ckpt.state["adam_t"]),
    )
    a = cli_json("eval", "--checkpoint", run, "--eval-iters", 3)["report"]
    b = cli_json("eval", "--checkpoint", copy, "--eval-iters", 3)["report"]
    assert a["loss"] == b["loss"] and a["tokens"] == b["tokens"]
    again = load_checkpoint(copy)
    assert all(np.array_equal(again.adam_m[n], ckpt.adam_m[n]) for n in ckpt.adam_m)
    # Regenerated frozen weights are recorded by their generator, not stored.
    assert again.model._m.frozen_generator() is not None


def test_foreign_frozen_weights_are_stored_in_full(tmp_path) -> None:
    cfg = small_config("orthogonal")
    rust = orthoformer.RustGPT(cfg, seed=1)
    frozen = {n: ft.value * -1.0 for n, ft in rust.frozen().items()}
    save_checkpoint(tmp_path / "c", cfg, rust.params(), frozen=frozen)
    back = load_checkpoint(tmp_path / "c")
    assert back.model._m.frozen_generator() is None
    assert all(np.array_equal(back.frozen[n].value, v) for n, v in frozen.items())


def test_damaged_folders_are_exceptions(cli, tmp_path) -> None:
    run = cli_train(cli, tmp_path, small_config(), steps=2)
    with pytest.raises(ValueError, match="not a folder"):
        load_checkpoint(tmp_path / "nowhere")
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    data = bytearray((bad / "model.safetensors").read_bytes())
    data[-5] ^= 0xFF
    (bad / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="truncated or modified"):
        load_checkpoint(bad)
    (bad / "state.json").write_text("{")
    with pytest.raises(ValueError, match="does not parse"):
        load_checkpoint(bad)


def test_save_rejects_mismatched_inputs(tmp_path) -> None:
    cfg = small_config()
    params = orthoformer.RustGPT(cfg).params()
    with pytest.raises(ValueError, match="missing"):
        save_checkpoint(tmp_path / "a", cfg, {k: v for k, v in params.items() if k != "wte"})
    with pytest.raises(ValueError, match="shape"):
        save_checkpoint(tmp_path / "b", cfg, {**params, "wpe": np.zeros((3, 3))})
    with pytest.raises(ValueError, match="vocabulary"):
        save_checkpoint(tmp_path / "c", small_config(vocab_size=70), {**params, "wte": np.zeros((70, 16))})
    with pytest.raises(ValueError, match="batch"):
        save_checkpoint(
            tmp_path / "d", cfg, params, options={**orthoformer.data.DEFAULTS["options"], "batch": 0}
        )
