"""``orthoformer.torch.nn``: ``OrthogonalAttention`` and the frozen projections as drop-in
modules (every variant, the library's frozen values, frozen matrices out of ``state_dict``,
optimizers and DDP, a seed that travels with ``state_dict``), trained inside a small
nanoGPT-style model written here; and the functional forms against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import orthoformer
import orthoformer.torch.functional as OF
from orthoformer.config import ATTENTIONS
from orthoformer.torch.nn import (
    FrozenOrthogonalLinear,
    OrthogonalAttention,
    VARIANTS,
    ignore_frozen_in_ddp,
)
from helpers import small_config

FROZEN = [v for v in ATTENTIONS if v.startswith("orthogonal") and v != "orthogonal-trained"]


def test_the_eight_variants_are_offered() -> None:
    assert set(VARIANTS) == set(ATTENTIONS) and len(VARIANTS) == 8


@pytest.mark.parametrize("variant", ATTENTIONS)
def test_every_variant_runs_and_trains_only_its_trainable_tensors(variant) -> None:
    torch.manual_seed(0)
    attn = OrthogonalAttention(16, 2, variant=variant, seed=3, bias=True)
    x = torch.randn(2, 9, 16, requires_grad=True)
    y = attn(x)
    assert y.shape == (2, 9, 16)
    y.square().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    names = {n for n, _ in attn.named_parameters()}
    frozen = set(attn.frozen_modules())
    for w in ("q", "k"):
        trained_w = f"{w}.weight" in names
        assert trained_w == (getattr(attn, w) is not None and w not in frozen)
    # state_dict: trained tensors, plus the seed of each frozen projection; no frozen matrix.
    sd = attn.state_dict()
    assert {k for k in sd if not k.endswith("frozen_seed")} == names
    assert all(not k.endswith(("q.weight", "k.weight")) or k in names for k in sd)
    assert all(p.grad is not None for p in attn.parameters())


@pytest.mark.parametrize("variant", FROZEN)
def test_frozen_matrices_are_the_library_ones_for_any_layer(variant) -> None:
    cfg = small_config(variant, n_layer=3, frozen_seed=11)
    rust = orthoformer.RustGPT(cfg, seed=0).frozen()
    for layer in range(3):
        attn = OrthogonalAttention(16, 2, variant=variant, seed=11, layer=layer, bias=True)
        for w, mod in attn.frozen_modules().items():
            want = rust[f"h.{layer}.attn.{w}.weight"].value
            assert np.array_equal(mod.weight.detach().numpy(), want), (variant, layer, w)
            assert not mod.weight.requires_grad


def test_seed_none_draws_from_torch_and_state_dict_carries_the_seed() -> None:
    torch.manual_seed(1)
    a = OrthogonalAttention(16, 4)
    torch.manual_seed(1)
    same = OrthogonalAttention(16, 4)
    torch.manual_seed(2)
    b = OrthogonalAttention(16, 4)
    assert a.seed == same.seed and torch.equal(a.q.weight, same.q.weight)
    assert a.seed != b.seed and not torch.equal(a.q.weight, b.q.weight)
    b.load_state_dict(a.state_dict())
    assert b.q.seed == a.seed and torch.equal(a.q.weight, b.q.weight) and torch.equal(a.k.weight, b.k.weight)
    x = torch.randn(1, 5, 16)
    assert torch.equal(a(x), b(x))


def test_given_frozen_values_are_stored_whole_and_load_as_such() -> None:
    a = OrthogonalAttention(16, 2, seed=0)
    w = torch.linalg.qr(torch.randn(16, 16))[0]
    a.q.set_weight_(w)
    sd = a.state_dict()
    assert torch.equal(sd["q.weight"], w) and "k.weight" not in sd
    b = OrthogonalAttention(16, 2, seed=0, layer=0)  # the same draws on purpose: no warning
    b.load_state_dict(sd)
    assert b.q.pinned and torch.equal(b.q.weight, w)


def test_state_dict_saves_with_safetensors(tmp_path) -> None:
    from safetensors.torch import load_file, save_file

    a = OrthogonalAttention(16, 2, variant="orthogonal-hadamard", seed=5, bias=True)
    save_file(a.state_dict(), str(tmp_path / "a.safetensors"))
    b = OrthogonalAttention(16, 2, variant="orthogonal-hadamard", seed=6, bias=True)
    b.load_state_dict(load_file(str(tmp_path / "a.safetensors")))
    assert torch.equal(a.q.weight, b.q.weight)


def test_meta_construction_then_reset_equals_direct() -> None:
    direct = OrthogonalAttention(16, 2, seed=4, layer=1)
    meta = OrthogonalAttention(16, 2, seed=4, layer=1, device="meta")
    assert meta.q.weight.is_meta
    meta.to_empty(device="cpu")
    meta.reset_frozen()
    assert torch.equal(meta.q.weight, direct.q.weight) and torch.equal(meta.k.weight, direct.k.weight)


def test_ddp_ignores_frozen_buffers() -> None:
    model = nn.Sequential(OrthogonalAttention(16, 2, seed=0), nn.Linear(16, 16))
    ignore_frozen_in_ddp(model)
    assert set(model._ddp_params_and_buffers_to_ignore) == {n for n, _ in model.named_buffers()}


def test_gqa_shaped_frozen_linear_has_orthonormal_heads() -> None:
    lin = FrozenOrthogonalLinear(32, 2, 8, seed=1, tensor=3)
    assert lin.weight.shape == (16, 32)
    for h in range(2):
        block = lin.weight[h * 8 : (h + 1) * 8].double()
        assert torch.allclose(block @ block.T, torch.eye(8, dtype=torch.float64), atol=1e-6)


def test_non_causal_and_functional_forms_match_direct_formulas() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 70, 4, dtype=torch.float64) for _ in range(3))
    fq, fk = OF.feature_map(q), OF.feature_map(k)
    a = fq @ fk.transpose(-1, -2)
    causal = a.tril()
    want = (causal @ v) / (causal.sum(-1, keepdim=True) + OF.LINEAR_EPS)
    assert torch.allclose(OF.linear_attention(q, k, v), want, atol=1e-10)
    full = (a @ v) / (a.sum(-1, keepdim=True) + OF.LINEAR_EPS)
    assert torch.allclose(OF.linear_attention(q, k, v, causal=False), full, atol=1e-10)
    # One softmax attention call over explicit weights equals the module.
    attn = OrthogonalAttention(16, 2, seed=2, bias=True, causal=False)
    x = torch.randn(2, 6, 16)
    biases = (attn.q.bias, attn.k.bias, attn.v.bias, attn.o.bias)
    got = OF.attention(
        x, attn.q.weight, attn.k.weight, attn.v.weight, attn.o.weight, 2, biases=biases, causal=False
    )
    assert torch.allclose(got, attn(x), atol=1e-6)
    s = (
        attn.q(x).view(2, 6, 2, 8).transpose(1, 2) @ attn.k(x).view(2, 6, 2, 8).permute(0, 2, 3, 1)
    ) / math.sqrt(8)
    y = (s.softmax(-1) @ attn.v(x).view(2, 6, 2, 8).transpose(1, 2)).transpose(1, 2).reshape(2, 6, 16)
    assert torch.allclose(attn.o(y), attn(x), atol=1e-6)


def test_bad_arguments_are_value_errors() -> None:
    with pytest.raises(ValueError, match="unknown attention variant"):
        OrthogonalAttention(16, 2, variant="quadratic")
    with pytest.raises(ValueError, match="not divisible"):
        OrthogonalAttention(16, 3)
    with pytest.raises(ValueError, match="unknown frozen method"):
        OrthogonalAttention(16, 2, method="gram-schmidt")


class TinyGPT(nn.Module):
    """A nanoGPT-style model written as a user would, with the attention swapped in."""

    def __init__(self, vocab: int, ctx: int, d: int, heads: int, layers: int, variant: str) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList()
        for layer in range(layers):
            self.blocks.append(
                nn.ModuleDict(
                    {
                        "ln1": nn.LayerNorm(d),
                        "attn": OrthogonalAttention(d, heads, variant=variant, seed=7, layer=layer),
                        "ln2": nn.LayerNorm(d),
                        "mlp": nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)),
                    }
                )
            )
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = x + b["attn"](b["ln1"](x))
            x = x + b["mlp"](b["ln2"](x))
        return self.head(self.ln_f(x))


def test_module_trains_inside_a_user_written_nanogpt() -> None:
    variant = "orthogonal"
    # The task needs attention: predict the token 4 positions back (a shifted copy).
    torch.manual_seed(0)
    model = TinyGPT(vocab=16, ctx=24, d=32, heads=4, layers=2, variant=variant)
    frozen = {n: b.clone() for n, b in model.named_buffers()}
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    assert all(id(b) not in {id(p) for p in model.parameters()} for b in model.buffers())
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(150):
        x = torch.randint(0, 16, (16, 24), generator=gen)
        logits = model(x)[:, 4:]
        loss = F.cross_entropy(logits.reshape(-1, 16), x[:, :-4].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 2.5  # ln 16 = 2.77: chance
    assert np.mean(losses[-10:]) < 1.0, f"{variant}: loss {np.mean(losses[-10:]):.3f} after training"
    assert all(torch.equal(frozen[n], b) for n, b in model.named_buffers())
