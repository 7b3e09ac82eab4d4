"""Frozen Hugging Face models under deferred initialisation: a model built on the meta device,
frozen by ``freeze_qk_``, then materialised as FSDP and PyTorch do it (``to_empty`` and the
``reset_parameters`` loop, or ``load_state_dict(assign=True)``) holds the frozen matrices a
model built on the CPU holds, bit for bit: never uninitialised memory."""

from __future__ import annotations

import pytest
import torch

try:
    import transformers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError("these tests need transformers: pip install transformers") from e

from orthoformer.torch import freeze_qk_
from orthoformer.validate import InputError
from helpers import tiny_llama_family

KINDS = ["llama", "mistral", "qwen2", "gpt2"]


def build(kind: str, kv_heads: int = 2) -> torch.nn.Module:
    """GPT-2 or the tiny Llama-family model of ``helpers`` (with ``kv_heads`` key heads of 4)."""
    if kind == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=2, n_head=4)
        return transformers.GPT2LMHeadModel(cfg).eval()
    m = tiny_llama_family(kind)
    if kv_heads == 2:
        return m
    cfg = m.config
    cfg.num_key_value_heads = kv_heads
    torch.manual_seed(0)
    return type(m)(cfg).eval()


def on_meta(kind: str, kv_heads: int = 2) -> torch.nn.Module:
    with torch.device("meta"):
        return build(kind, kv_heads)


def frozen(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The frozen Q/K matrices, by buffer name."""
    return {
        n: b.detach().clone()
        for n, b in model.named_buffers(remove_duplicate=False)
        if n.endswith(("q_weight", "k_weight", "q_proj.weight", "k_proj.weight"))
    }


@pytest.mark.parametrize("variant", ["orthogonal", "orthogonal-tied"])
@pytest.mark.parametrize("kind", KINDS)
def test_to_empty_and_reset_parameters_draw_the_frozen_matrices_again(kind, variant) -> None:
    kv = 4 if variant == "orthogonal-tied" else 2  # tying Q and K needs as many key heads
    want = frozen(freeze_qk_(build(kind, kv), variant, seed=3))
    m = freeze_qk_(on_meta(kind, kv), variant, seed=3)
    m.to_empty(device="cpu")
    got = frozen(m)
    assert got.keys() == want.keys() and got
    for n in want:
        assert torch.equal(got[n], want[n]), n
    for mod in m.modules():
        if hasattr(mod, "reset_parameters"):
            mod.reset_parameters()
    for n, t in frozen(m).items():
        assert torch.equal(t, want[n]), n
    # The modules freeze_qk_ installs initialise their trainable tensors too (transformers'
    # own Conv1D and Linear are the model's business: `init_weights`).
    ours = [p for n, p in m.named_parameters() if any(k in n for k in ("c_attn", "q_proj", "k_proj"))]
    assert all(torch.isfinite(p).all() for p in ours)


@pytest.mark.parametrize("kind", KINDS)
def test_load_state_dict_assign_on_a_meta_model_takes_the_loaded_values(kind) -> None:
    ref = freeze_qk_(build(kind), "orthogonal", seed=4)
    m = freeze_qk_(on_meta(kind), "orthogonal", seed=4)
    m.load_state_dict(ref.state_dict(), assign=True)
    got, want = frozen(m), frozen(ref)
    assert got.keys() == want.keys() and got
    for n in want:
        assert torch.equal(got[n], want[n]), n
    ref_params = dict(ref.named_parameters(remove_duplicate=False))
    for n, p in m.named_parameters(remove_duplicate=False):
        assert not p.is_meta and torch.equal(p, ref_params[n]), n
    if kind == "gpt2":  # the Llama family's rotary tables are not in a state_dict: still meta
        x = torch.randint(0, 50, (2, 8))
        with torch.no_grad():
            assert torch.equal(m(input_ids=x).logits, ref(input_ids=x).logits)


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_hadamard_on_a_meta_model_is_refused_in_one_line(kind) -> None:
    with pytest.raises(InputError, match="meta-built model") as e:
        freeze_qk_(on_meta(kind), "orthogonal-hadamard", seed=1)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("safe", [True, False])
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_an_orthogonal_tied_llama_family_model_saves_and_loads(tmp_path, kind, safe) -> None:
    import orthoformer.torch as ot

    model = freeze_qk_(build(kind, kv_heads=4), "orthogonal-tied", seed=7)
    x = torch.randint(0, 50, (2, 8))
    with torch.no_grad():
        want = model(input_ids=x).logits
    model.save_pretrained(tmp_path, safe_serialization=safe)
    plain = type(model).from_pretrained(tmp_path).eval()  # transformers alone: a standard folder
    back = ot.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(plain(input_ids=x).logits, want)
        assert torch.equal(back(input_ids=x).logits, want)
    for layer in back.model.layers:
        assert layer.self_attn.k_proj._q is layer.self_attn.q_proj


def test_a_tied_model_frozen_twice_is_refused_as_any_frozen_model() -> None:
    model = freeze_qk_(build("llama", kv_heads=4), "orthogonal-tied", seed=7)
    with pytest.raises(InputError, match="frozen already"):
        freeze_qk_(model, "orthogonal", seed=1)
