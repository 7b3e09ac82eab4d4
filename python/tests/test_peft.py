"""peft's LoRA on frozen Hugging Face models: with peft's default targets
(``q_proj``/``v_proj``; GPT-2's ``c_attn``) ``get_peft_model`` wraps the frozen projections,
the adapter is masked on the frozen Q/K rows (they stay the seed's matrices, bit for bit,
under AdamW with weight decay), ``V`` is adapted, and adapters save, load and merge with the
outputs unchanged."""

from __future__ import annotations

import copy
import io

import pytest
import torch

try:
    import peft
    import transformers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError("these tests need peft and transformers: pip install peft transformers") from e

from orthoformer.torch import freeze_qk_
from orthoformer.torch.hf_frozen import FrozenLinear, FrozenQKVConv1D
from orthoformer.validate import InputError
from helpers import tiny_llama_family

KINDS = ["llama", "mistral", "qwen2", "gpt2"]
#: Merging reorders the sums (``x·(W + ΔW)`` against ``x·W + x·ΔW``): float32 round-off.
MERGE_TOL = 1e-5


def frozen_model(kind: str) -> torch.nn.Module:
    """A tiny model of ``kind`` with its Q/K frozen from seed 5 (the same for a given kind)."""
    if kind == "gpt2":
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=2, n_head=4)
        model = transformers.GPT2LMHeadModel(cfg).eval()
    else:
        model = tiny_llama_family(kind)
    return freeze_qk_(model, "orthogonal", seed=5)


def frozen_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every frozen Q/K matrix, by module name (without peft's wrapping in the name)."""
    out = {}
    for n, m in model.named_modules():
        n = n.removeprefix("base_model.model.").removesuffix(".base_layer")
        if isinstance(m, FrozenQKVConv1D):
            out[n + ".q"], out[n + ".k"] = m.q_weight.clone(), m.k_weight.clone()
        elif isinstance(m, FrozenLinear):
            out[n] = m.weight.clone()
    return out


def train_(model: torch.nn.Module, steps: int = 3) -> None:
    """A few AdamW steps (weight decay on) of next-token loss on fixed random tokens."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.1)
    x = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        model(input_ids=x, labels=x).loss.backward()
        opt.step()
    model.eval()


def logits(model: torch.nn.Module) -> torch.Tensor:
    x = torch.randint(0, 50, (2, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        return model(input_ids=x).logits


def wrapped(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """peft's LoRA layers of ``model``, by name."""
    return {n: m for n, m in model.named_modules() if isinstance(m, peft.tuners.lora.LoraLayer)}


@pytest.mark.parametrize("kind", KINDS)
def test_default_targets_train_v_and_never_the_frozen_q_k(kind) -> None:
    model = frozen_model(kind)
    before = frozen_tensors(model)
    base_logits = logits(model)
    pm = peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM"))
    layers = wrapped(pm)
    want = ("c_attn",) if kind == "gpt2" else ("q_proj", "v_proj")
    assert layers and {n.rsplit(".", 1)[1] for n in layers} == set(want)
    assert all(p.requires_grad == ("lora_" in n) for n, p in pm.named_parameters())
    torch.testing.assert_close(logits(pm), base_logits, rtol=0, atol=0)  # B starts at zero
    train_(pm)
    after = frozen_tensors(pm)
    assert after.keys() == before.keys() and after
    for n in before:
        assert torch.equal(after[n], before[n]), n
    for n, m in layers.items():
        b = m.lora_B["default"].weight
        frozen = getattr(m.get_base_layer(), "lora_frozen_rows", 0)
        assert torch.count_nonzero(b[:frozen]) == 0, n  # masked rows: exactly zero
        if n.endswith(("c_attn", "v_proj")):
            assert torch.count_nonzero(b[frozen:]) > 0, n  # V is adapted
    assert not torch.equal(logits(pm), base_logits)


@pytest.mark.parametrize("kind", KINDS)
def test_adapters_save_load_and_merge_with_the_same_outputs(tmp_path, kind) -> None:
    # A LoRA bias where the targets have biases (peft cannot merge one into a bias-free base).
    config = peft.LoraConfig(task_type="CAUSAL_LM", lora_bias=kind in ("gpt2", "qwen2"))
    pm = peft.get_peft_model(frozen_model(kind), config)
    train_(pm)
    want = logits(pm)
    pm.save_pretrained(tmp_path)
    back = peft.PeftModel.from_pretrained(frozen_model(kind), tmp_path)
    torch.testing.assert_close(logits(back), want, rtol=0, atol=0)
    frozen = frozen_tensors(back)
    merged = back.merge_and_unload()
    assert not wrapped(merged)
    kinds = {type(m) for m in merged.modules()}
    assert (FrozenQKVConv1D if kind == "gpt2" else FrozenLinear) in kinds  # still frozen modules
    torch.testing.assert_close(logits(merged), want, rtol=0, atol=MERGE_TOL)
    for n, t in frozen_tensors(merged).items():
        assert torch.equal(t, frozen[n]), n


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_a_random_or_loaded_b_is_masked_on_the_frozen_rows(kind) -> None:
    # init_lora_weights=False starts B random: the frozen rows are zeroed all the same, and
    # values loaded there (an adapter trained on an unfrozen model) are ignored.
    model = frozen_model(kind)
    base_logits = logits(model)
    pm = peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM", init_lora_weights=False))
    for m in wrapped(pm).values():
        n = getattr(m.get_base_layer(), "lora_frozen_rows", 0)  # v_proj: none
        assert torch.count_nonzero(m.lora_B["default"].weight[:n]) == 0
        with torch.no_grad():
            m.lora_B["default"].weight.fill_(1.0)
    x = torch.randn(2, 5, 32)
    for name, m in wrapped(pm).items():
        base = m.get_base_layer()
        n = getattr(base, "lora_frozen_rows", 0)
        with torch.no_grad():
            torch.testing.assert_close(m(x)[..., :n], base(x)[..., :n], rtol=0, atol=0)
            assert torch.count_nonzero(m.get_delta_weight("default")[:n]) == 0, name
    assert not torch.equal(logits(pm), base_logits)  # V (v_proj, c_attn's third) still adapts


@pytest.mark.parametrize(
    "config",
    [dict(use_dora=True), dict(init_lora_weights="pissa"), dict(init_lora_weights="olora")],
    ids=["dora", "pissa", "olora"],
)
def test_variants_that_rewrite_the_base_weight_are_refused_in_one_line(config) -> None:
    with pytest.raises(InputError, match="frozen") as e:
        peft.get_peft_model(frozen_model("llama"), peft.LoraConfig(task_type="CAUSAL_LM", **config))
    assert "\n" not in str(e.value)


def test_other_peft_tuners_on_a_frozen_module_are_refused() -> None:
    with pytest.raises(InputError, match="frozen"):
        peft.get_peft_model(
            frozen_model("llama"), peft.LoHaConfig(task_type="CAUSAL_LM", target_modules=["q_proj"])
        )


def test_unfrozen_models_keep_peft_s_own_lora() -> None:
    pm = peft.get_peft_model(tiny_llama_family("llama"), peft.LoraConfig(task_type="CAUSAL_LM"))
    assert {type(m) for m in wrapped(pm).values()} == {peft.tuners.lora.Linear}


def test_a_tied_model_and_a_pickled_or_copied_peft_model_keep_the_mask() -> None:
    # orthogonal-tied: k_proj calls the frozen q_proj module itself, not peft's wrapper around
    # it; the keys are the same, the wrapper's adapter being masked.
    cfg = tiny_llama_family("llama").config
    cfg.num_key_value_heads = 4
    torch.manual_seed(0)
    model = freeze_qk_(transformers.LlamaForCausalLM(cfg).eval(), "orthogonal-tied", seed=5)
    pm = peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM", init_lora_weights=False))
    want = logits(pm)
    buf = io.BytesIO()
    torch.save(pm, buf)  # the masked class and its hooks pickle
    buf.seek(0)
    for other in (torch.load(buf, weights_only=False), copy.deepcopy(pm)):
        torch.testing.assert_close(logits(other), want, rtol=0, atol=0)
        assert {type(m).__name__ for n, m in wrapped(other).items() if "q_proj" in n} == {"MaskedLoraLinear"}


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_transformers_initialize_weights_skips_the_frozen_modules(kind) -> None:
    # As nn.Linear subclasses they would match transformers' generic Linear branch, which
    # draws N(0, 0.02²): they are marked initialised instead.
    model = frozen_model(kind)
    before = frozen_tensors(model)
    others = {n: p.detach().clone() for n, p in model.named_parameters()}
    for m in model.modules():  # forget transformers' own marks: everything else is drawn again
        m.__dict__.pop("_is_hf_initialized", None)
        for t in (*m.parameters(recurse=False), *m.buffers(recurse=False)):
            t.__dict__.pop("_is_hf_initialized", None)
    model.initialize_weights()
    for n, t in frozen_tensors(model).items():
        assert torch.equal(t, before[n]), n
    assert any(not torch.equal(p, others[n]) for n, p in model.named_parameters()), "nothing was drawn"
