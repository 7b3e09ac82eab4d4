"""``orthoformer.rotate`` on SmolLM2-135M (the project's test model): the rotated model's
logits equal the original's, and the files it writes load again."""

from __future__ import annotations

import pytest

import orthoformer
from conftest import ROOT, smollm2
from helpers import same_message


def test_rotation_keeps_the_logits_and_writes_a_loadable_gguf(tmp_path) -> None:
    model = smollm2()
    out = tmp_path / "rotated.gguf"
    r = orthoformer.rotate(
        model,
        out,
        rotation="hadamard",
        seed=1,
        gguf_type="f16",
        check=ROOT / "data" / "tinyshakespeare.txt",
        check_tokens=48,
        context=48,
        # The check reads the written f16 file back: its rounding moves logits by about 0.04
        # (mean KL 4e-6), beyond the default tolerance, which is f32's.
        tolerance=0.1,
    )
    assert r["width"] == 576 and r["outputs"] == [str(out)] and out.stat().st_size > 100_000_000
    c = r["check"]
    assert r["check_passed"] and c["max_abs_logit_diff"] < 0.1 and c["top1_agreement"] > 0.99
    assert abs(c["ppl_a"] - c["ppl_b"]) < 1e-3 * c["ppl_a"]
    # The written file is itself a model the library reads (rotating it again checks it).
    again = orthoformer.rotate(
        out, rotation="random", check=ROOT / "data" / "tinyshakespeare.txt", check_tokens=16, context=16
    )
    assert again["check"]["max_abs_logit_diff"] < 1e-2


def test_bad_requests_are_exceptions(tmp_path) -> None:
    with pytest.raises(ValueError, match="nothing to do"):
        orthoformer.rotate(tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="rotation"):
        orthoformer.rotate(tmp_path / "x.gguf", tmp_path / "y", rotation="givens")
    with pytest.raises((OSError, ValueError)):
        orthoformer.rotate(tmp_path / "missing.gguf", tmp_path / "y")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\xff" * 64)
    with pytest.raises(ValueError):
        orthoformer.rotate(junk, tmp_path / "z")


def test_the_command_line_and_python_refuse_the_same_inputs_alike(cli, tmp_path) -> None:
    """Both front ends call the library's one rotate operation: the same bad request gives
    the same message (flags in one, keywords in the other) and writes nothing."""
    model = tmp_path / "never-read.gguf"
    never = tmp_path / "never.gguf"
    cases = [
        ({}, []),
        (
            {"out": never, "check": True, "tolerance": float("nan")},
            ["--out", never, "--check", "--tolerance", "NaN"],
        ),
        (
            {"out": never, "check": True, "check_tokens": 0},
            ["--out", never, "--check", "--check-tokens", "0"],
        ),
        ({"out": never, "check": True, "context": 1}, ["--out", never, "--check", "--context", "1"]),
        # Read past the checks of the request itself: the model must exist.
        ({"out": never}, ["--out", never]),
    ]
    for kwargs, flags in cases:
        p = cli("rotate", "--model", model, *flags, check=False)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        with pytest.raises((ValueError, OSError)) as e:
            orthoformer.rotate(model, **kwargs)
        same_message(p.stderr, str(e.value))
        assert not never.exists()


def test_a_window_past_the_model_is_refused_alike(cli, tmp_path) -> None:
    """A check window longer than the model's context, refused after loading it by both."""
    model = smollm2()
    p = cli("rotate", "--model", model, "--check", "--context", 1 << 20, check=False)
    assert p.returncode == 2 and "exceeds the model's" in p.stderr, p.stderr
    with pytest.raises(ValueError) as e:
        orthoformer.rotate(model, check=True, context=1 << 20)
    same_message(p.stderr, str(e.value))
