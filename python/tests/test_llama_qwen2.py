"""Attention biases in ``orthoformer.torch.Llama``: a tiny random ``transformers``
``Qwen2ForCausalLM`` (biases on q/k/v, none on o; made here, no hub) and a Llama with
``attention_bias`` (biases on q/k/v/o) load with transformers' logits and write back folders
transformers loads with the same logits; a frozen variant equals ``freeze_qk_`` on the
transformers model (Q/K biases trainable from zero) and its marked folder keeps trained
biases; Qwen2 config fields that would change the function are refused by name. Needs
``transformers`` (CI installs it)."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

try:
    import transformers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError("these tests need transformers: pip install transformers") from e

from orthoformer.torch import Llama, LlamaConfig, freeze_qk_
from orthoformer.torch import hf as ohf
from orthoformer.validate import InputError

V = 128
#: float32 logits, ours against transformers' (measured ≤ 5e-6).
TOL = 1e-5
SHAPE = dict(
    vocab_size=V,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    tie_word_embeddings=False,
)


def perturbed(model: transformers.PreTrainedModel, seed: int) -> transformers.PreTrainedModel:
    """Every weight, norm and bias well away from its initial value (biases large), so a
    missed, misplaced or zeroed tensor shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1 + 0.3 * noise if "norm" in name else (0.5 if name.endswith("bias") else 0.15) * noise)
    return model.eval()


def tiny_qwen2(kv: int = 2, seed: int = 0) -> transformers.Qwen2ForCausalLM:
    cfg = transformers.Qwen2Config(**{**SHAPE, "num_key_value_heads": kv})
    return perturbed(transformers.Qwen2ForCausalLM(cfg), seed)


def tiny_biased_llama(seed: int = 1) -> transformers.LlamaForCausalLM:
    return perturbed(
        transformers.LlamaForCausalLM(transformers.LlamaConfig(**SHAPE, attention_bias=True)), seed
    )


def save(model: transformers.PreTrainedModel, folder: pathlib.Path) -> pathlib.Path:
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def ids(b: int = 2, t: int = 24) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(6))


def diff(ours: Llama, theirs: torch.nn.Module, x: torch.Tensor) -> float:
    with torch.no_grad():
        return (ours.eval()(x)[0] - theirs.eval()(input_ids=x).logits).abs().max().item()


def bias_names(model: Llama) -> set[str]:
    return {n.split(".", 3)[3] for n, _ in model.named_parameters() if n.endswith("bias")}


def test_qwen2_folder_gives_transformers_logits_and_round_trips(tmp_path) -> None:
    hf = tiny_qwen2()
    model = Llama.from_hf(save(hf, tmp_path / "hf"))
    assert model.config.family == "qwen2" and bias_names(model) == {"q.bias", "k.bias", "v.bias"}
    x = ids()
    d = diff(model, hf, x)
    assert d <= TOL, f"max |Δlogit| {d:.2e}"
    # The biases carry weight: without them the logits move far.
    bare = Llama.from_hf(tmp_path / "hf")
    with torch.no_grad():
        for layer in bare.layers:
            for m in (layer.self_attn.q, layer.self_attn.k, layer.self_attn.v):
                m.bias.zero_()
    assert diff(bare, hf, x) > 1e-2
    model.to_hf(tmp_path / "out")
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["architectures"] == ["Qwen2ForCausalLM"]
    back_hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert isinstance(back_hf, transformers.Qwen2ForCausalLM)
    d = diff(model, back_hf, x)
    assert d <= TOL, f"round trip through transformers: max |Δlogit| {d:.2e}"
    with torch.no_grad():
        assert torch.equal(Llama.from_hf(tmp_path / "out").eval()(x)[0], model(x)[0])


def test_llama_attention_bias_puts_biases_on_q_k_v_and_o(tmp_path) -> None:
    hf = tiny_biased_llama()
    model = Llama.from_hf(save(hf, tmp_path / "hf"))
    assert model.config.attention_bias and bias_names(model) == {"q.bias", "k.bias", "v.bias", "o.bias"}
    x = ids()
    assert diff(model, hf, x) <= TOL
    model.to_hf(tmp_path / "out")
    assert json.loads((tmp_path / "out" / "config.json").read_text())["attention_bias"] is True
    back = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "out")
    assert diff(model, back, x) <= TOL


@pytest.mark.parametrize(
    "attention,kv", [("orthogonal", 2), ("orthogonal-tied", 4), ("orthogonal-hadamard", 4)]
)
def test_frozen_qwen2_equals_freeze_qk_and_keeps_trained_biases(tmp_path, attention, kv) -> None:
    """Frozen W_Q/W_K: Q/K biases trainable from zero (as freeze_qk_ starts them; a bias
    trained for the replaced matrix means nothing to the frozen one), V's loaded. After a
    training step, to_hf writes the trained biases and from_hf (the marker) keeps them."""
    hf = tiny_qwen2(kv)
    model = Llama.from_hf(save(hf, tmp_path / "hf"), attention=attention, frozen_seed=21)
    freeze_qk_(hf, attention, seed=21)
    x = ids()
    assert diff(model, hf, x) <= TOL
    attn = model.layers[0].self_attn
    assert torch.count_nonzero(attn.q.bias) == 0 and attn.q.bias.requires_grad
    assert (attn.k is None) == (attention == "orthogonal-tied")
    assert torch.count_nonzero(attn.v.bias) > 0
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    _, loss = model.train()(x, labels=x)
    loss.backward()
    opt.step()
    assert torch.count_nonzero(attn.q.bias) > 0, "the query bias did not train"
    model.to_hf(tmp_path / "out")
    back = Llama.from_hf(tmp_path / "out")
    assert back.config.attention == attention
    with torch.no_grad():
        assert torch.equal(back.eval()(x)[0], model.eval()(x)[0])
    # transformers with the marker read (frozen again, stored values kept) agrees too.
    assert diff(model, ohf.from_pretrained(tmp_path / "out"), x) <= TOL


def test_qwen2_fields_are_honoured_or_refused_by_name() -> None:
    base = tiny_qwen2().config.to_dict()
    read = LlamaConfig.from_hf_dict
    # Real Qwen2 configs name a window they switch off, or switch it on below every layer.
    assert read({**base, "use_sliding_window": False, "sliding_window": 4096}).family == "qwen2"
    on = {"use_sliding_window": True, "sliding_window": 16}
    assert read({**base, **on, "layer_types": ["full_attention"] * 2}).family == "qwen2"
    assert read({**base, **on, "layer_types": None, "max_window_layers": 2}).family == "qwen2"
    cases = {
        "sliding_window 16 from layer 1": {**on, "layer_types": ["full_attention", "sliding_attention"]},
        "sliding_window 16 from layer 0": {**on, "layer_types": None, "max_window_layers": 0},
        "sliding_window 4096": {"use_sliding_window": True, "layer_types": None, "sliding_window": None}
        | {"max_window_layers": 1},
        "layer_types\\[1\\] 'chunked_attention'": {"layer_types": ["full_attention", "chunked_attention"]},
        "attention_bias true is not a Qwen2 field": {"attention_bias": True},
        "mlp_bias": {"mlp_bias": True},
        "architecture 'LlamaForCausalLM' is not Qwen2ForCausalLM": {"architectures": ["LlamaForCausalLM"]},
        "rope_parameters.rope_type 'yarn'": {"rope_parameters": {"rope_type": "yarn", "factor": 4.0}},
    }
    for message, change in cases.items():
        cfg = {**base, **change}
        if change.get("sliding_window", 0) is None:
            del cfg["sliding_window"]  # absent: transformers' Qwen2 default of 4096
        with pytest.raises(InputError, match=message):
            read(cfg)
    with pytest.raises(InputError, match="identity-q has no query projection"):
        read(base, attention="identity-q")
    with pytest.raises(InputError, match="attention_bias is a Llama field"):
        LlamaConfig(V, 64, 128, 2, 4, family="qwen2", attention_bias=True)
