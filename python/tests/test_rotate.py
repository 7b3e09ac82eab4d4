"""``orthoformer.rotate`` on SmolLM2-135M (the project's test model): the rotated model's
logits equal the original's, and the files it writes load again."""

from __future__ import annotations

import pytest

import orthoformer
from conftest import ROOT, smollm2


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
    )
    assert r["width"] == 576 and r["outputs"] == [str(out)] and out.stat().st_size > 100_000_000
    c = r["check"]
    assert c["max_abs_logit_diff"] < 1e-2 and c["top1_agreement"] > 0.99
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
