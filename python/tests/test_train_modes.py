"""``python -m orthoformer.train``'s execution modes change how a step is computed, never what:
gradient accumulation (with DDP's ``no_sync`` on the inner micro-steps) equals the whole
batch, FSDP over two gloo ranks equals one process, ``--compile`` equals eager, bf16 autocast
trains to a loss near fp32's; SIGTERM checkpoints and the run resumes bit for bit; bad flags
exit 2 with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import orthoformer
from conftest import python_module
from test_train import max_diff, train, weights

STEPS = [
    "--context",
    16,
    "--steps",
    10,
    "--lr",
    1e-2,
    "--warmup",
    2,
    "--eval-every",
    10,
    "--eval-iters",
    1,
    "--seed",
    5,
    "--device",
    "cpu",
]


@pytest.fixture
def tiny(tmp_path):
    """A 2-layer model of width 16 without attention biases (see test_train's ``tiny``)."""
    cfg = orthoformer.GPTConfig.preset("tiny")
    cfg.attn_bias = False
    path = tmp_path / "tiny.json"
    path.write_text(cfg.to_json())
    return ["--config", path]


def test_grad_accum_and_ddp_no_sync_equal_the_whole_batch(tmp_path, tiny) -> None:
    whole, accum, ddp = (tmp_path / n for n in ("whole", "accum", "ddp"))
    train(*tiny, *STEPS, "--attention", "orthogonal", "--batch", 8, "--out", whole)
    train(*tiny, *STEPS, "--attention", "orthogonal", "--batch", 2, "--grad-accum", 4, "--out", accum)
    # Two ranks, two micro-steps of 4 rows (2 per rank): the first under no_sync.
    train(
        *tiny, *STEPS, "--attention", "orthogonal", "--batch", 4, "--grad-accum", 2, "--out", ddp, torchrun=2
    )
    a, b, c = weights(whole), weights(accum), weights(ddp)
    assert max_diff(a, b) < 1e-5 and max_diff(a, c) < 1e-5
    states = [orthoformer.load_checkpoint(r).state for r in (whole, accum, ddp)]
    assert {s["options"]["batch"] for s in states} == {8}
    assert len({s["sampler_word_pos"] for s in states}) == 1


def test_fsdp_on_two_gloo_ranks_equals_one_process(cli, cli_json, tmp_path, tiny) -> None:
    one, fsdp = tmp_path / "one", tmp_path / "fsdp"
    args = [*tiny, *STEPS, "--attention", "orthogonal-hadamard", "--batch", 8]
    train(*args, "--out", one)
    p = train(*args, "--fsdp", "--out", fsdp, torchrun=2)
    assert "FSDP2" in p.stderr
    assert max_diff(weights(one), weights(fsdp)) < 1e-5
    a, b = (orthoformer.load_checkpoint(r) for r in (one, fsdp))
    assert max(float(np.abs(a.adam_v[k] - b.adam_v[k]).max()) for k in a.adam_v) < 1e-6
    # The checkpoint is the library's: the Rust trainer continues it, eval reads it.
    cli("train", "--out", fsdp, "--resume", "--steps", 12)
    assert cli_json("eval", "--checkpoint", fsdp, "--eval-iters", 1)["step"] == 12


def test_compile_equals_eager(tmp_path) -> None:
    """One block (inductor's C++ compilation dominates the test's time, and grows with the
    graph), softmax attention, three steps."""
    cfg = orthoformer.GPTConfig.preset("tiny")
    cfg.attn_bias, cfg.n_layer = False, 1
    (tmp_path / "one.json").write_text(cfg.to_json())
    eager, compiled = tmp_path / "eager", tmp_path / "compiled"
    short = ["--config", tmp_path / "one.json", *STEPS, "--steps", 3, "--eval-every", 3, "--batch", 4]
    train(*short, "--compile", "off", "--out", eager)
    p = train(*short, "--compile", "on", "--out", compiled)
    assert "compile on" in p.stderr
    assert max_diff(weights(eager), weights(compiled)) < 1e-4


def test_bf16_autocast_trains_close_to_fp32(tmp_path, tiny) -> None:
    """bf16 keeps 8 bits of mantissa: after 30 steps the validation loss (about 3.3 from
    4.2) may differ from fp32's by at most 0.05."""
    runs = {}
    for dtype in ("fp32", "bf16"):
        out = tmp_path / dtype
        p = train(
            *tiny,
            *STEPS,
            "--steps",
            30,
            "--eval-every",
            30,
            "--eval-iters",
            4,
            "--batch",
            8,
            "--dtype",
            dtype,
            "--out",
            out,
        )
        assert f"dtype {dtype}" in p.stderr
        runs[dtype] = [m["val_loss"] for m in _metrics(out)]
    (f0, f1), (b0, b1) = runs["fp32"], runs["bf16"]
    assert b1 < b0 - 0.3 and f1 < f0 - 0.3  # both trained
    assert abs(b1 - f1) < 0.05
    assert max_diff(weights(tmp_path / "fp32"), weights(tmp_path / "bf16")) > 0  # bf16 really ran


def _metrics(run) -> list[dict]:
    import json

    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_sigterm_checkpoints_and_resumes_bit_identically(tmp_path, tiny) -> None:
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    args = [*map(str, tiny), *map(str, STEPS), "--steps", "300", "--eval-every", "100", "--batch", "4"]
    train(*args, "--out", whole, "--log-every", 0)
    cmd = [sys.executable, "-m", "orthoformer.train", *args, "--log-every", "1", "--out", str(parts)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None
    line = p.stdout.readline()  # the first progress line: training is under way
    assert line.startswith("step") and "tok/s" in line, line
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 75 and "SIGTERM" in err and "interrupted at step" in err, err
    step = orthoformer.load_checkpoint(parts).step
    assert 0 < step < 300
    train("--out", parts, "--resume")
    a, b = weights(whole), weights(parts)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    sa, sb = (orthoformer.load_checkpoint(r).state for r in (whole, parts))
    assert sa["sampler_word_pos"] == sb["sampler_word_pos"]


def test_progress_lines_report_throughput(tmp_path, tiny) -> None:
    p = train(*tiny, *STEPS, "--batch", 4, "--log-every", 5, "--peak-tflops", 1, "--out", tmp_path / "r")
    lines = [x for x in p.stdout.splitlines() if "tok/s" in x]
    assert len(lines) == 2 and lines[0].startswith("step      5")
    assert all("ms/step" in x and "MFU" in x and "loss" in x for x in lines)
    assert "vocabulary 65 (char tokenizer)" in p.stderr and "dtype fp32" in p.stderr
    tok = orthoformer.load_checkpoint(tmp_path / "r").tokenizer
    assert tok.name == "char" and tok.decode(tok.encode("ROMEO:\nO")) == "ROMEO:\nO"


def test_tensorboard_logs_or_says_what_is_missing(tmp_path, tiny) -> None:
    tb = tmp_path / "tb"
    p = python_module(
        "orthoformer.train",
        *tiny,
        *STEPS,
        "--batch",
        4,
        "--log-every",
        5,
        "--tensorboard",
        tb,
        "--out",
        tmp_path / "r",
    )
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        assert p.returncode == 2 and "pip install tensorboard" in p.stderr, p.stderr
        return
    assert p.returncode == 0, p.stderr
    assert any(f.name.startswith("events.out.tfevents") for f in tb.iterdir())


@pytest.mark.parametrize(
    "args,message",
    [
        (["--grad-accum", 0], "--grad-accum must be from 1"),
        (["--dtype", "fp8"], "--dtype fp8"),
        (["--compile", "maybe"], "--compile maybe"),
        (["--fsdp"], "--fsdp shards over processes"),
        (["--data-dir", "/nonexistent"], "no meta.json"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, tiny, args, message) -> None:
    p = python_module("orthoformer.train", *tiny, *STEPS, *args, "--out", tmp_path / "x")
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
