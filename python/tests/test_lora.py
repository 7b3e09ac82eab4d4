"""LoRA (``orthoformer.torch.lora``, the ``lora`` mode of ``finetune``): it starts at the base
model, trains only its low-rank factors (the base weights do not move), learns updates of
rank at most r whose singular values a rotation of the base leaves unchanged, and refuses bad
settings by name."""

from __future__ import annotations

import pytest
import torch

from orthoformer import finetune as ft
from orthoformer.torch.lora import LoRALinear, add_lora_, effective_rank, lora_deltas
from test_finetune import tiny_llama, tokens


def test_lora_starts_at_the_base_model_and_trains_only_its_factors() -> None:
    base = tiny_llama().eval()
    model = tiny_llama().eval()
    names = add_lora_(model, 4, 8.0, ["q_proj", "down_proj"], seed=3)
    assert names == ["layers.0.q_proj", "layers.0.down_proj", "layers.1.q_proj", "layers.1.down_proj"]
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    with torch.no_grad():
        assert torch.equal(base(ids).logits, model(ids).logits)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    # Reproducible from the seed, different across seeds.
    again = tiny_llama()
    add_lora_(again, 4, 8.0, ["q_proj", "down_proj"], seed=3)
    other = tiny_llama()
    add_lora_(other, 4, 8.0, ["q_proj", "down_proj"], seed=4)
    a = model.model.layers[1].mlp.down_proj.lora_a
    assert torch.equal(a, again.model.layers[1].mlp.down_proj.lora_a)
    assert not torch.equal(a, other.model.layers[1].mlp.down_proj.lora_a)


def test_lora_mode_learns_low_rank_updates_and_leaves_the_base() -> None:
    start = tiny_llama()
    model = tiny_llama()
    train, val = tokens()
    r = ft.finetune(
        model,
        train,
        val,
        "lora",
        steps=20,
        context=16,
        batch=4,
        lr=1e-2,
        warmup=2,
        val_windows_n=4,
        lora_rank=2,
    )
    assert r["val_loss_after"] < r["val_loss_before"] - 0.1, r
    layer0 = model.model.layers[0]
    assert isinstance(layer0.self_attn.v_proj, LoRALinear)
    assert torch.equal(layer0.self_attn.v_proj.base.weight, start.model.layers[0].self_attn.v_proj.weight)
    assert torch.equal(model.model.embed_tokens.weight, start.model.embed_tokens.weight)
    c, f, kv = 32, 64, 16
    per_layer = 2 * ((c + c) + (c + kv) + (c + kv) + (c + c) + (c + f) + (c + f) + (f + c))
    assert r["trainable"] == 2 * per_layer
    deltas = lora_deltas(model)
    assert len(deltas) == 14 and r["update_rank"]["modules"] == 14
    for d in deltas.values():
        s = torch.linalg.svdvals(d.double())
        assert s[0] > 0 and (s > 1e-5 * s[0]).sum() <= 2  # float32 products: 1e-8 noise
    assert 0 < r["update_rank"]["effective_rank"] <= 2.0 + 1e-9
    # Full fine-tuning's updates are of higher rank than LoRA's.
    full = ft.finetune(
        tiny_llama(), train, val, "full", steps=20, context=16, batch=4, lr=1e-2, warmup=2, val_windows_n=4
    )
    assert full["update_rank"]["effective_rank"] > 2.0


def test_effective_rank_is_invariant_under_rotations() -> None:
    g = torch.Generator().manual_seed(0)
    d = torch.randn(12, 3, generator=g, dtype=torch.float64) @ torch.randn(
        3, 20, generator=g, dtype=torch.float64
    )
    q, _ = torch.linalg.qr(torch.randn(20, 20, generator=g, dtype=torch.float64))
    a, b = effective_rank(d), effective_rank(d @ q)
    assert abs(a["effective_rank"] - b["effective_rank"]) < 1e-9 and a["rank90"] == b["rank90"] <= 3
    assert effective_rank(torch.zeros(3, 3)) == {"effective_rank": 0.0, "rank90": 0.0}


def test_bad_settings_are_refused_by_name() -> None:
    for kw, name in (
        ({"lora_rank": 0}, "lora_rank"),
        ({"lora_alpha": -1.0}, "lora_alpha"),
        ({"lora_targets": ["wq"]}, "lora_targets"),
        ({"lora_targets": []}, "lora_targets"),
    ):
        args = {"lora_rank": 2, "lora_alpha": 4.0, "lora_targets": ["q_proj"], **kw}
        with pytest.raises(ValueError, match=name):
            add_lora_(tiny_llama(), args["lora_rank"], args["lora_alpha"], args["lora_targets"])
