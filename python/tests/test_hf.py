"""Hugging Face interop: ``freeze_qk_`` on small random ``transformers`` models (GPT-2 and the
Llama family, GQA included) made here, no hub; ``GPT.from_hf``/``to_hf`` against
``transformers``' own GPT-2. Needs ``transformers`` (CI installs it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

try:
    import transformers
except ImportError as e:  # pragma: no cover - a clear failure, never a skip
    raise ImportError("these tests need transformers: pip install transformers") from e

import orthoformer
from orthoformer.torch import GPT, freeze_qk_
from orthoformer.torch.functional import frozen_orthogonal_weight
from helpers import small_config, tiny_llama_family


def tiny_gpt2(seed: int = 0) -> transformers.GPT2LMHeadModel:
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(
        vocab_size=50,
        n_positions=16,
        n_embd=16,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    return transformers.GPT2LMHeadModel(cfg).eval()


def trainable(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def ids(b: int = 2, t: int = 12, v: int = 50) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(3).integers(0, v, (b, t)))


def train_steps(model: torch.nn.Module, x: torch.Tensor, steps: int = 3) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def test_gpt2_weights_load_into_the_library_gpt_with_equal_logits(tmp_path) -> None:
    hf = tiny_gpt2()
    hf.save_pretrained(tmp_path)
    model = GPT.from_hf(tmp_path).eval()
    x = ids()
    with torch.no_grad():
        assert torch.allclose(model(x)[0], hf(x).logits, atol=1e-5)


def test_freeze_qk_on_gpt2_equals_the_library_gpt_with_the_same_seed(tmp_path) -> None:
    hf = tiny_gpt2()
    hf.save_pretrained(tmp_path)
    before = trainable(hf)
    x = ids()
    with torch.no_grad():
        plain = hf(x).logits
    freeze_qk_(hf, "orthogonal", seed=9, method="householder")
    c, layers = 16, 2
    assert before - trainable(hf) == layers * 2 * c * c  # exactly W_Q and W_K
    ours = GPT.from_hf(tmp_path, attention="orthogonal", frozen_seed=9, frozen_method="householder").eval()
    with torch.no_grad():
        frozen_logits = hf(x).logits
        assert torch.allclose(frozen_logits, ours(x)[0], atol=1e-5)
    assert not torch.allclose(frozen_logits, plain, atol=1e-3)
    fused = hf.transformer.h[1].attn.c_attn
    want = frozen_orthogonal_weight(16, 2, method="householder", seed=9, tensor=3)
    assert torch.equal(fused.k_weight, want)
    kept = {n: b.clone() for n, b in hf.named_buffers() if n.endswith(("q_weight", "k_weight"))}
    train_steps(hf, x)
    assert all(torch.equal(kept[n], b) for n, b in hf.named_buffers() if n in kept)


def test_frozen_gpt2_saves_as_standard_gpt2_and_refreezes_from_the_marker(tmp_path) -> None:
    hf = freeze_qk_(tiny_gpt2(), "orthogonal", seed=4)
    train_steps(hf, ids())
    hf.save_pretrained(tmp_path)
    plain = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    x = ids()
    with torch.no_grad():
        assert torch.allclose(plain(x).logits, hf(x).logits, atol=1e-5)
    # transformers alone: the frozen values are ordinary trainable weights.
    assert trainable(plain) == trainable(hf) + 2 * 2 * 16 * 16
    assert plain.config.orthoformer == {"attention": "orthogonal", "frozen_method": "qr", "frozen_seed": 4}
    freeze_qk_(plain)
    assert trainable(plain) == trainable(hf)
    with torch.no_grad():
        assert torch.allclose(plain(x).logits, hf(x).logits, atol=1e-5)
    back = GPT.from_hf(tmp_path).eval()
    assert back.config.attention == "orthogonal" and not back.frozen_pinned()
    with torch.no_grad():
        assert torch.allclose(back(x)[0], hf(x).logits, atol=1e-5)


@pytest.mark.parametrize("kind", ["llama", "mistral", "qwen2"])
def test_freeze_qk_on_llama_family_respects_gqa_and_trains_nothing_frozen(kind) -> None:
    model = tiny_llama_family(kind)
    x = ids()
    before = trainable(model)
    attn = model.model.layers[0].self_attn
    has_bias = attn.q_proj.bias is not None
    freeze_qk_(model, "orthogonal", seed=2)
    h, kv, d, c = 4, 2, 8, 32
    assert before - trainable(model) == 2 * (h * d * c + kv * d * c)  # exactly W_Q and W_K
    attn = model.model.layers[1].self_attn
    assert attn.q_proj.weight.shape == (h * d, c) and attn.k_proj.weight.shape == (kv * d, c)
    assert torch.equal(attn.k_proj.weight, frozen_orthogonal_weight(c, kv, d, seed=2, tensor=3))
    assert (attn.q_proj.bias is not None) == has_bias
    if has_bias:
        assert attn.q_proj.bias.requires_grad and float(attn.q_proj.bias.detach().abs().sum()) == 0.0
    names = {n for n, _ in model.named_parameters()}
    assert not any(n.endswith(("q_proj.weight", "k_proj.weight")) for n in names)
    kept = {n: b.clone() for n, b in model.named_buffers() if n.endswith("proj.weight")}
    train_steps(model, x)
    assert kept and all(torch.equal(kept[n], b) for n, b in model.named_buffers() if n in kept)
    with torch.no_grad():
        assert torch.isfinite(model(x).logits).all()


def test_freeze_qk_refuses_what_it_cannot_convert() -> None:
    with pytest.raises(ValueError, match="makes orthogonal"):
        freeze_qk_(tiny_gpt2(), "linear")
    with pytest.raises(ValueError, match="as many key heads"):
        freeze_qk_(tiny_llama_family("llama"), "orthogonal-tied")
    bert = transformers.BertModel(
        transformers.BertConfig(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
    )
    with pytest.raises(ValueError, match="model_type 'bert'"):
        freeze_qk_(bert)


@pytest.mark.parametrize("attention", ["orthogonal-tied", "orthogonal-hadamard", "identity-q"])
def test_to_hf_writes_a_gpt2_transformers_loads_with_the_same_logits(tmp_path, attention) -> None:
    model = GPT(small_config(attention, vocab_size=50), seed=3).eval()
    model.to_hf(tmp_path)
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    x = ids(t=16)
    with torch.no_grad():
        assert torch.allclose(hf(x).logits, model(x)[0], atol=1e-5)
    back = GPT.from_hf(tmp_path).eval()
    assert back.config.attention == attention and back.config.frozen_seed == 3
    assert not back.frozen_pinned()  # the stored matrices are the regenerated ones
    assert {n for n, _ in back.named_parameters()} == {n for n, _ in model.named_parameters()}
    with torch.no_grad():
        assert torch.allclose(back(x)[0], model(x)[0], atol=1e-6)
    with pytest.raises(ValueError, match="GPT-2 has no form"):
        GPT(small_config("linear")).to_hf(tmp_path / "lin")


def test_cli_export_keeps_frozen_meaning(cli, tmp_path) -> None:
    from helpers import cli_train

    run = cli_train(cli, tmp_path, small_config("orthogonal"), steps=3)
    cli("export", "--checkpoint", run, "--out", tmp_path / "hf")
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf").eval()
    marker = hf.config.orthoformer
    assert marker == {"attention": "orthogonal", "frozen_method": "qr", "frozen_seed": 3}
    before = trainable(hf)
    freeze_qk_(hf)
    assert before - trainable(hf) == 2 * 2 * 16 * 16
    rust = orthoformer.load_checkpoint(run).model
    x = ids(t=16, v=65)
    with torch.no_grad():
        assert np.abs(hf(x).logits.numpy() - rust.logits(x.numpy())).max() <= 1e-4
