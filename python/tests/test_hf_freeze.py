"""A Hugging Face round trip that keeps the freeze:
``orthoformer.torch.from_pretrained`` loads a folder written by ``GPT.to_hf`` or by
``save_pretrained`` after ``freeze_qk_`` with its frozen Q/K frozen again (buffers, out of the
optimizer), the stored values and the logits unchanged. Tiny models made here, no hub."""

from __future__ import annotations

import numpy as np
import pytest
import torch

try:
    import transformers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError("these tests need transformers: pip install transformers") from e

import orthoformer.torch as ot
from orthoformer.torch import GPT, freeze_qk_
from orthoformer.torch.frozen import FrozenOrthogonalLinear
from orthoformer.torch.hf import FrozenQKVConv1D
from helpers import small_config, tiny_llama_family


def ids(b: int = 2, t: int = 10, v: int = 50) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(5).integers(0, v, (b, t)))


def step(model: torch.nn.Module, x: torch.Tensor) -> None:
    """One AdamW step on every parameter (what a fine-tune does)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    model(input_ids=x, labels=x).loss.backward()
    opt.step()
    model.eval()


def frozen_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The frozen Q/K matrices, by buffer name."""
    return {
        n: b.detach().clone()
        for n, b in model.named_buffers()
        if n.endswith(("q_weight", "k_weight", "q_proj.weight", "k_proj.weight"))
    }


def trainable(model: torch.nn.Module) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("variant", ["orthogonal", "orthogonal-tied", "orthogonal-hadamard"])
def test_from_pretrained_refreezes_a_gpt2_folder_written_by_to_hf(tmp_path, variant) -> None:
    ours = GPT(small_config(variant, frozen_seed=6, dropout=0.0), seed=1).eval()
    ours.to_hf(tmp_path)
    model = ot.from_pretrained(tmp_path).eval()
    assert isinstance(model, transformers.GPT2LMHeadModel)
    fused = [b.attn.c_attn for b in model.transformer.h]
    assert all(isinstance(f, FrozenQKVConv1D) for f in fused)
    assert not any(n.endswith("c_attn.weight") for n in trainable(model))
    for layer, f in enumerate(fused):
        assert torch.equal(f.q_weight, ours.frozen_buffers()[f"h.{layer}.attn.q.weight"])
        if variant != "orthogonal-tied":
            assert torch.equal(f.k_weight, ours.frozen_buffers()[f"h.{layer}.attn.k.weight"])
    x = ids(v=65)
    with torch.no_grad():
        assert torch.allclose(model(x).logits, ours(x)[0], atol=1e-5)
    kept = frozen_state(model)
    step(model, x)
    after = frozen_state(model)
    assert kept and all(torch.equal(kept[n], after[n]) for n in kept)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_from_pretrained_refreezes_a_llama_family_folder_saved_after_freeze_qk(tmp_path, kind) -> None:
    frozen = freeze_qk_(tiny_llama_family(kind), "orthogonal", seed=2, method="householder")
    x = ids()
    step(frozen, x)  # trained biases and V/O, frozen Q/K
    frozen.save_pretrained(tmp_path)
    back = ot.from_pretrained(tmp_path).eval()
    assert type(back) is type(frozen)
    for layer in back.model.layers:
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
            assert isinstance(proj, FrozenOrthogonalLinear) and proj.pinned
            assert not proj.weight.requires_grad and "weight" in dict(proj.named_buffers())
    assert trainable(back) == trainable(frozen)
    want, got = frozen_state(frozen), frozen_state(back)
    assert want.keys() == got.keys() and all(torch.equal(want[n], got[n]) for n in want)
    with torch.no_grad():
        assert torch.equal(back(x).logits, frozen(x).logits)
    assert back.config.orthoformer == {
        "attention": "orthogonal",
        "frozen_method": "householder",
        "frozen_seed": 2,
    }
    step(back, x)
    after = frozen_state(back)
    assert all(torch.equal(got[n], after[n]) for n in got)


def test_from_pretrained_leaves_an_unmarked_folder_as_transformers_loads_it(tmp_path) -> None:
    plain = tiny_llama_family("llama")
    plain.save_pretrained(tmp_path)
    back = ot.from_pretrained(tmp_path)
    assert isinstance(back.model.layers[0].self_attn.q_proj, torch.nn.Linear)
    assert trainable(back) == trainable(plain)
