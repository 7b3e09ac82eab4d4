"""Generation with ``orthoformer.torch.Llama`` and its key/value cache: a tiny random
``transformers`` Llama (made here, no hub; grouped-query and plain heads, tied and untied)
loaded by ``Llama.from_hf`` decodes greedily the tokens ``LlamaForCausalLM.generate(
do_sample=False)`` decodes; the cached logits equal the uncached forward's at every position
(RoPE continuing from the cache's length) for softmax and frozen variants; and a request past
``max_position_embeddings`` is refused in one line before anything runs. Needs
``transformers`` (CI installs it)."""

from __future__ import annotations

import pathlib

import pytest
import torch

try:
    import transformers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError("these tests need transformers: pip install transformers") from e

from orthoformer.torch import Llama, LlamaConfig
from orthoformer.torch.attention import KVCache
from orthoformer.validate import InputError

V = 128
#: float32: cached against uncached logits, and ours against transformers' (measured ≤ 5e-6).
TOL = 1e-5


def tiny_hf(kv: int, tied: bool = False, seed: int = 0) -> transformers.LlamaForCausalLM:
    """hidden 64, 4 heads, ``kv`` key/value heads, 2 layers, vocabulary 128, 64 positions;
    weights well away from their initial values, so greedy decoding does not settle on one
    token and a misplaced tensor or position shows."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.3 * torch.randn_like(p) if "norm" in name else 0.15 * torch.randn_like(p))
    # Ours never stops at an end-of-sequence token: neither may transformers' here.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def folder_of(model: transformers.PreTrainedModel, folder: pathlib.Path) -> pathlib.Path:
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def prompts(b: int = 2, t: int = 7, seed: int = 3) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kv,tied", [(2, False), (4, False), (1, True)])
def test_greedy_generate_equals_transformers(tmp_path, kv, tied) -> None:
    hf = tiny_hf(kv, tied)
    model = Llama.from_hf(folder_of(hf, tmp_path / "hf"))
    assert model.config.num_key_value_heads == kv
    x = prompts()
    new = 40
    with torch.no_grad():
        # An explicit mask: transformers would otherwise take prompt tokens equal to the pad id
        # for padding.
        want = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=new)
    got = model.generate(x, new, temperature=0)
    assert got.shape == (2, x.shape[1] + new) and torch.equal(got[:, : x.shape[1]], x)
    assert len(got[:, x.shape[1] :].unique()) > 5, "decoding settled on a few tokens: a weak test"
    diverged = (got != want).nonzero()
    assert torch.equal(got, want), f"first differing (row, position) {diverged[0].tolist()}"


def cached_vs_full(model: Llama, x: torch.Tensor) -> float:
    """Max |Δlogit| between the uncached forward over ``x`` and the cache fed a prefill of 10
    positions, a chunk of 3, then one position at a time."""
    caches = [KVCache() for _ in model.layers]
    worst = 0.0
    with torch.no_grad():
        full = model.eval()(x)[0]
        pieces = [(0, 10), (10, 13)] + [(t, t + 1) for t in range(13, x.shape[1])]
        for a, b in pieces:
            got = model.cached_logits(x[:, a:b], caches, a)
            worst = max(worst, (got - full[:, b - 1]).abs().max().item())
    assert all(c.length == x.shape[1] for c in caches)
    return worst


@pytest.mark.parametrize(
    "attention,kv", [("softmax", 2), ("orthogonal", 2), ("orthogonal-tied", 4), ("orthogonal-hadamard", 4)]
)
def test_cached_logits_equal_the_uncached_forward(tmp_path, attention, kv) -> None:
    """Softmax as loaded; frozen variants with their frozen W_Q/W_K (from_hf replaces them)."""
    model = Llama.from_hf(folder_of(tiny_hf(kv), tmp_path / "hf"), attention=attention, frozen_seed=5)
    x = prompts(2, 30, seed=4)
    diff = cached_vs_full(model, x)
    assert diff <= TOL, f"{attention}: max |Δlogit| {diff:.2e}"


def test_cached_steps_are_turned_by_their_own_position(tmp_path) -> None:
    """A cache holding other positions is refused, not decoded at the wrong RoPE angle; and
    the position matters: the same token at position 12 and at position 0 differs."""
    model = Llama.from_hf(folder_of(tiny_hf(2), tmp_path / "hf")).eval()
    x = prompts(1, 13)
    caches = [KVCache() for _ in model.layers]
    with torch.no_grad():
        model.cached_logits(x[:, :12], caches, 0)
        with pytest.raises(InputError, match="holding 12 positions|holding \\[12\\]"):
            model.cached_logits(x[:, 12:], caches, 3)
        at_12 = model.cached_logits(x[:, 12:], caches, 12)
        alone = model.cached_logits(x[:, 12:], [KVCache() for _ in model.layers], 0)
    assert (at_12 - alone).abs().max() > 1e-2


@pytest.mark.parametrize("attention", ["orthogonal", "identity-q", "linear"])
def test_generate_equals_argmax_of_the_full_forward(attention) -> None:
    """Frozen (cached) and linear (recomputed) variants decode what recomputing the whole
    sequence and taking the argmax decodes; sampling repeats under one generator seed and
    leaves the training mode as found."""
    torch.manual_seed(8)
    cfg = LlamaConfig(V, 64, 128, 2, 4, num_key_value_heads=2, attention=attention, frozen_seed=3)
    model = Llama(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(1.0 if p.dim() == 1 else 0.0, 0.3 if p.dim() == 1 else 0.15)
    x = prompts(2, 5)
    got = model.generate(x, 20, temperature=0)
    assert model.training
    want = x
    model.eval()
    with torch.no_grad():
        for _ in range(20):
            want = torch.cat((want, model(want)[0][:, -1].argmax(-1, keepdim=True)), dim=1)
    assert torch.equal(got, want)
    g = lambda: torch.Generator().manual_seed(1)  # noqa: E731
    a = model.generate(x, 12, temperature=1.0, top_k=20, generator=g())
    assert torch.equal(a, model.generate(x, 12, temperature=1.0, top_k=20, generator=g()))


def test_generate_refuses_more_than_max_position_embeddings(tmp_path) -> None:
    model = Llama.from_hf(folder_of(tiny_hf(2), tmp_path / "hf"))  # 64 positions
    x = prompts(1, 60)
    assert model.generate(x, 4, temperature=0).shape == (1, 64)  # exactly the limit
    with pytest.raises(InputError, match="need 65 positions, more than max_position_embeddings 64") as e:
        model.generate(x, 5, temperature=0)
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="max_new_tokens"):
        model.generate(x, -1)
    with pytest.raises(ValueError, match="idx must be a non-empty"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), 3)
