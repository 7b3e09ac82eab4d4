"""``orthoformer.align_weights`` (``align --weights``) on a random 2-layer Llama saved by
transformers: a rotated copy (residual and value heads) is aligned back onto the original,
the written folder gives transformers the rotated model's logits (it is the same function),
and its weights are the original's with the RMSNorm weights folded."""

from __future__ import annotations

import pytest
import torch

import orthoformer
from helpers import tiny_bpe_llama_folder


def _logits(folder, ids):
    import transformers

    m = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return m(torch.tensor([ids])).logits[0]


def test_a_rotated_copy_is_aligned_back_and_transformers_runs_it(tmp_path) -> None:
    import safetensors.torch

    a, tok = tiny_bpe_llama_folder(tmp_path)
    text = tmp_path / "t.txt"
    b = tmp_path / "b"
    orthoformer.rotate(a, b, rotation="random", seed=4)
    # rotate() has no R2; a heads fit on a residual-only rotation finds nothing more to do.
    r = orthoformer.align_weights(
        a,
        b,
        tmp_path / "back",
        heads=True,
        check=text,
        check_tokens=48,
        context=32,
        true_rotation="random",
        seed=4,
    )
    assert r["distance_before"] > 0.5 and r["distance_after"] < 1e-6, r["steps"]
    assert r["distance_to_true_inverse"] < 1e-6
    assert r["check_passed"] and r["check"]["max_abs_logit_diff"] < 1e-4
    assert r["outputs"] == [str(tmp_path / "back")]
    ids = tok(text.read_text()[:200])["input_ids"][:40]
    want = _logits(a, ids)
    got = _logits(tmp_path / "back", ids)
    assert (want - got).abs().max().item() < 1e-4
    # The aligned q_proj is the original's times its input norm's weight (folded), not rotated.
    orig = safetensors.torch.load_file(a / "model.safetensors")
    back = safetensors.torch.load_file(tmp_path / "back" / "model.safetensors")
    q = orig["model.layers.0.self_attn.q_proj.weight"] * orig["model.layers.0.input_layernorm.weight"]
    assert (back["model.layers.0.self_attn.q_proj.weight"] - q).abs().max().item() < 1e-6


def test_bad_requests_are_exceptions(tmp_path) -> None:
    a, _ = tiny_bpe_llama_folder(tmp_path)
    with pytest.raises(ValueError, match="iterations"):
        orthoformer.align_weights(a, a, iterations=0)
    with pytest.raises(ValueError, match="true_rotation"):
        orthoformer.align_weights(a, a, true_rotation="givens")
    with pytest.raises(ValueError, match="residual"):
        orthoformer.align_weights(a, a, residual="shuffle")
    with pytest.raises((OSError, ValueError)):
        orthoformer.align_weights(a, tmp_path / "missing")
    with pytest.raises(ValueError, match="context"):
        orthoformer.align_weights(a, a, context=4096)
