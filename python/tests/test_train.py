"""``python -m orthoformer.train``: two gloo processes with batch b each reach the weights one
process reaches with batch 2b; a stopped run resumes to the same weights; the trainer matches
``orthoformer train`` step for step; its checkpoints load in ``orthoformer eval``; bad options
exit 2 with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import orthoformer
from conftest import python_module

COMMON = [
    "--context",
    "16",
    "--steps",
    20,
    "--lr",
    1e-2,
    "--warmup",
    2,
    "--eval-every",
    10,
    "--eval-iters",
    2,
    "--seed",
    3,
]


@pytest.fixture
def tiny(tmp_path):
    """``--config`` of the ``tiny`` preset without attention biases: a key bias has a zero
    gradient in exact arithmetic (softmax ignores a shift of all keys), so AdamW would turn
    its rounding noise into steps of size lr and no two summation orders would agree on it."""
    cfg = orthoformer.GPTConfig.preset("tiny")
    cfg.attn_bias = False
    path = tmp_path / "tiny.json"
    path.write_text(cfg.to_json())
    return ["--config", path]


def train(*args, torchrun: int = 0):
    p = python_module("orthoformer.train", *args, torchrun=torchrun)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def weights(run) -> dict[str, np.ndarray]:
    return orthoformer.load_checkpoint(run).params


def read_metrics(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def max_diff(a: dict, b: dict) -> float:
    assert set(a) == set(b)
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


def test_two_gloo_processes_equal_one_with_the_whole_batch(cli_json, tmp_path, tiny) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    train(*tiny, *COMMON, "--attention", "orthogonal", "--batch", 8, "--out", one, "--device", "cpu")
    train(
        *tiny, *COMMON, "--attention", "orthogonal", "--batch", 8, "--out", two, "--device", "cpu", torchrun=2
    )
    a, b = weights(one), weights(two)
    assert max_diff(a, b) < 1e-5
    sa, sb = (orthoformer.load_checkpoint(r).state for r in (one, two))
    assert sa["sampler_word_pos"] == sb["sampler_word_pos"] and sb["step"] == 20
    ev = cli_json("eval", "--checkpoint", two, "--eval-iters", 2)
    assert ev["step"] == 20 and np.isfinite(ev["report"]["loss"])


@pytest.mark.parametrize("world_size, finalised", [("2", False), ("1", True)])
def test_a_rank_leaves_without_finalising_python(world_size, finalised) -> None:
    # gloo's worker threads can abort a finalising interpreter (the CI saw a finished two-rank
    # run exit -6 after writing its checkpoint): ranks skip finalisation, keeping their status
    # and their printed lines; a single process exits normally.
    code = (
        "import atexit; from orthoformer.train import leave; "
        "atexit.register(lambda: print('finalised')); print('done', end=''); leave(3)"
    )
    env = dict(os.environ, WORLD_SIZE=world_size)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 3 and p.stdout.startswith("done")
    assert ("finalised" in p.stdout) == finalised


def test_stopped_run_resumes_to_the_same_weights(tmp_path, tiny) -> None:
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    train(*tiny, *COMMON, "--attention", "linear", "--batch", 4, "--out", whole)
    train(*tiny, *COMMON, "--attention", "linear", "--batch", 4, "--out", parts, "--stop-at", 7)
    assert orthoformer.load_checkpoint(parts).step == 7
    train("--out", parts, "--resume")
    a, b = weights(whole), weights(parts)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    ma = (whole / "metrics.jsonl").read_text().splitlines()
    mb = (parts / "metrics.jsonl").read_text().splitlines()
    assert len(ma) == len(mb) == 3


def test_matches_the_rust_trainer(cli, tmp_path, tiny) -> None:
    rust, py = tmp_path / "rust", tmp_path / "py"
    args = [*tiny, *COMMON, "--attention", "orthogonal-hadamard", "--batch", 4]
    cli("train", *args, "--out", rust)
    train(*args, "--out", py)
    a, b = orthoformer.load_checkpoint(rust), orthoformer.load_checkpoint(py)
    assert max_diff(a.params, b.params) < 1e-4
    assert a.state["sampler_word_pos"] == b.state["sampler_word_pos"]
    ma, mb = (read_metrics(r) for r in (rust, py))
    assert [m["step"] for m in ma] == [m["step"] for m in mb] == [0, 10, 20]
    for ra, rb in zip(ma, mb):
        assert ra["lr"] == rb["lr"]
        assert ra["val_loss"] == pytest.approx(rb["val_loss"], abs=1e-4)
        # The last step's norm before clipping, in both logs (none at step 0).
        if ra["step"] > 0:
            assert ra["grad_norm"] == pytest.approx(rb["grad_norm"], rel=1e-3)
    assert "grad_norm" not in ma[0] and "grad_norm" not in mb[0] and ma[1]["grad_norm"] > 0
    # Each tool continues the other's checkpoint.
    cli("train", "--out", py, "--resume", "--steps", 22)
    train("--out", rust, "--resume", "--steps", 22)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--batch", 3], "not divisible"),
        (["--lr", -1], "--lr must be a positive number"),
        (["--attention", "quadratic"], "unknown attention"),
        (["--tokenizer", "char", "--vocab-size", 300], "applies to --tokenizer bpe only"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path, tiny, args, message) -> None:
    torchrun = 2 if message == "not divisible" else 0
    p = python_module("orthoformer.train", *tiny, *COMMON, *args, "--out", tmp_path / "x", torchrun=torchrun)
    assert p.returncode != 0 and message in p.stderr


def test_resume_refuses_new_options(tmp_path, tiny) -> None:
    run = tmp_path / "r"
    train(*tiny, *COMMON, "--batch", 4, "--out", run, "--stop-at", 2)
    p = python_module("orthoformer.train", "--out", run, "--resume", "--lr", 1e-3)
    assert p.returncode == 2 and "only --steps may change" in p.stderr


def test_defaults_are_the_cli_defaults(cli, tmp_path) -> None:
    rust, py = tmp_path / "rust", tmp_path / "py"
    cli("train", "--steps", 1, "--eval-iters", 1, "--out", rust)
    train("--steps", 1, "--eval-iters", 1, "--out", py)
    a, b = (orthoformer.load_checkpoint(r).state for r in (rust, py))
    assert a["options"] == b["options"] and a["model"] == b["model"] and a["model_seed"] == b["model_seed"]
    assert a["options"]["batch"] == 16 and a["model"]["context"] == 64


def test_recipe_and_single_fields_are_the_cli_s(cli, tmp_path) -> None:
    """``--recipe`` gives the recipe's model and options, and ``--width``, ``--position`` and
    ``--temperature`` apply over it, as ``orthoformer train`` resolves them."""
    rust, py = tmp_path / "rust", tmp_path / "py"
    args = ["--recipe", "nanogpt-cpu", "--width", 64, "--position", "rope", "--temperature", "learned"]
    args += ["--steps", 1, "--eval-iters", 1]
    cli("train", *args, "--out", rust)
    train(*args, "--out", py)
    a, b = (orthoformer.load_checkpoint(r).state for r in (rust, py))
    assert a["options"] == b["options"] and a["model"] == b["model"] and a["model_seed"] == b["model_seed"]
    assert a["options"]["batch"] == 12 and a["options"]["min_lr"] == 1e-4
    model = a["model"]
    assert (model["d_model"], model["d_ff"], model["gelu"]) == (64, 256, "erf")
    assert (model["position"], model["temperature"]) == ("rope", "learned")


@pytest.mark.parametrize(
    "flag,value", [("--position", "learned"), ("--temperature", "fixed"), ("--width", 32)]
)
def test_resume_refuses_another_model_field_in_both_tools(cli, tmp_path, flag, value) -> None:
    """A single model field that differs from the checkpoint's is refused in one line: the
    command line compared only attention, context and width before, and a default left out
    of the file form never compared unequal."""
    run = tmp_path / "r"
    cli(
        "train",
        "--recipe",
        "nanogpt-cpu",
        "--position",
        "rope",
        "--temperature",
        "learned",
        "--steps",
        2,
        "--eval-iters",
        1,
        "--stop-at",
        1,
        "--out",
        run,
    )
    c = cli("train", "--out", run, "--resume", flag, value, check=False)
    assert c.returncode == 2 and "does not match the requested model" in c.stderr, c.stderr
    p = python_module("orthoformer.train", "--out", run, "--resume", flag, value)
    assert p.returncode == 2, p.stderr
    # One check in the library, so one message (each tool names the options its own way).
    message = c.stderr.strip().splitlines()[-1].split("checkpoint ", 1)[1].split("; drop")[0]
    assert message in p.stderr, (c.stderr, p.stderr)
    p = python_module("orthoformer.train", "--out", run, "--resume", "--recipe", "nanogpt-cpu")
    assert p.returncode == 2 and "only --steps may change" in p.stderr, p.stderr


def test_cuda_selects_nccl_and_the_gpu(monkeypatch) -> None:
    import torch

    from orthoformer.torch import distributed

    assert distributed.backend_for(torch.device("cpu")) == "gloo"
    assert distributed.backend_for(torch.device("cuda", 0)) == "nccl"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert distributed.pick_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert distributed.pick_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="no CUDA device"):
        distributed.pick_device("cuda")


def test_ctrl_c_checkpoints_and_resumes(tmp_path, tiny) -> None:
    import os
    import signal
    import subprocess
    import sys

    run = tmp_path / "r"
    cmd = [sys.executable, "-m", "orthoformer.train", *map(str, tiny), *map(str, COMMON)]
    cmd += ["--steps", "100000", "--batch", "4", "--eval-every", "5", "--out", str(run)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None
    first = p.stdout.readline()  # the first evaluation line: training is under way
    assert first.startswith("step"), first
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 75 and "interrupted at step" in err, err  # EX_TEMPFAIL: resumable
    step = int(err.split("interrupted at step ")[1].split(";")[0])
    assert orthoformer.load_checkpoint(run).step == step
    train("--out", run, "--resume", "--steps", step + 3)
    assert orthoformer.load_checkpoint(run).step == step + 3


def test_non_finite_evaluation_keeps_the_last_good_checkpoint(tmp_path, tiny, monkeypatch, capsys):
    """An evaluation that is not finite (the update after a finite step loss blew the
    weights up) stops the run with one line and is never committed: the folder keeps the last
    good checkpoint, which the library loads."""
    import math

    from orthoformer import train as train_module
    from orthoformer.torch import trainer as trainer_module

    real = trainer_module.Trainer.estimate_loss

    def blown_after_step_4(self, split):
        return float("nan") if self.state["step"] >= 4 else real(self, split)

    monkeypatch.setattr(trainer_module.Trainer, "estimate_loss", blown_after_step_4)
    out = tmp_path / "run"
    argv = [str(a) for a in [*COMMON, *tiny, "--eval-every", 2, "--device", "cpu", "--out", out]]
    assert train_module.main(argv) == 2
    # The banner goes to stderr too; the error is its own, single, last line.
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: "), err
    assert "became nan at step 4" in err and "last good checkpoint (step 2)" in err, err
    ckpt = orthoformer.load_checkpoint(out)
    assert ckpt.state["step"] == 2
    assert all(math.isfinite(r["val_loss"]) for r in read_metrics(out))


def test_resume_keeps_the_first_runs_cosine_as_the_cli_does(cli, tmp_path, tiny) -> None:
    """``--resume --steps`` with more steps keeps the first run's decay horizon (the
    rate goes on at ``--min-lr``, never back up), with the library's schedule and rule, as
    ``orthoformer train`` does; ``--lr-decay-steps`` may be named again, not changed."""
    py, rust = tmp_path / "py", tmp_path / "rust"
    common = list(COMMON)
    common[common.index("--eval-every") + 1] = 1  # every step's rate in the metrics log
    args = [*tiny, *common, "--min-lr", 1e-3, "--batch", 4]
    train(*args, "--out", py, "--device", "cpu")
    cli("train", *args, "--out", rust)
    train("--out", py, "--resume", "--steps", 30, "--device", "cpu")
    cli("train", "--out", rust, "--resume", "--steps", 30)
    lr = [r["lr"] for r in read_metrics(py) if r["step"] > 0]
    assert lr == [r["lr"] for r in read_metrics(rust) if r["step"] > 0]
    assert len(lr) == 30 and 1e-3 < lr[19] < lr[18], lr
    assert lr[20:] == [1e-3] * 10, lr
    assert orthoformer.load_checkpoint(py).state["options"]["lr_decay_steps"] == 20
    train("--out", py, "--resume", "--steps", 31, "--lr-decay-steps", 20, "--device", "cpu")
    p = python_module("orthoformer.train", "--out", py, "--resume", "--steps", 32, "--lr-decay-steps", 25)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        f"error: checkpoint {py} decays the learning rate over 20 steps, which a resumed run keeps "
        "(steps past it run at --min-lr): drop --lr-decay-steps 25, or train a new run into another --out"
    )
