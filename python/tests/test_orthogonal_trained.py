"""The ``orthogonal-trained`` control: softmax attention whose trainable ``W_Q, W_K`` start at
the matrices ``orthogonal`` freezes. The PyTorch GPT starts where the Rust one does (every
tensor bit for bit, ``W_Q, W_K`` the orthogonal model's frozen ones), gives its loss, trains
``W_Q, W_K`` with weight decay, builds alike on ``meta`` and exports as a plain GPT-2; the
paths that cannot take it (a Llama, ``freeze_qk_``) refuse it in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import orthoformer
from orthoformer.torch import GPT, Llama
from orthoformer.torch.drawn import DrawnInitLinear
from orthoformer.torch.functional import frozen_orthogonal_weight
from orthoformer.torch.llama_config import LlamaConfig
from orthoformer.torch.nn import OrthogonalAttention
from helpers import small_config, tokens

QK = [f"h.{layer}.attn.{w}.weight" for layer in range(2) for w in "qk"]


@pytest.mark.parametrize("method", ["qr", "gaussian"])
def test_torch_gpt_starts_at_the_rust_values_and_gives_its_loss(method) -> None:
    cfg = small_config("orthogonal-trained", frozen_method=method, frozen_seed=11)
    model, rust = GPT(cfg, seed=4), orthoformer.RustGPT(cfg, seed=4)
    frozen = orthoformer.RustGPT(small_config("orthogonal", frozen_method=method, frozen_seed=11), seed=4)
    assert rust.frozen() == {} and model.frozen_buffers() == {}
    params = dict(model.named_parameters())
    assert set(params) == set(rust.params())
    for name, p in params.items():
        assert np.array_equal(p.detach().numpy(), rust.params()[name]), name
    for name in QK:
        assert params[name].requires_grad
        assert np.array_equal(params[name].detach().numpy(), frozen.frozen()[name].value), name
    for name, value in frozen.params().items():
        assert np.array_equal(params[name].detach().numpy(), value), name
    x, y = tokens(2, 16, 5), tokens(2, 16, 6)
    with torch.no_grad():
        logits, loss = model.eval()(torch.from_numpy(x), torch.from_numpy(y))
    assert np.abs(logits.numpy() - rust.logits(x)).max() <= 1e-5
    assert abs(loss.item() - rust.loss(x, y)) <= 1e-5


def test_q_and_k_train_with_weight_decay() -> None:
    model = GPT(small_config("orthogonal-trained"), seed=1)
    decay, _ = model.decay_groups()
    params = dict(model.named_parameters())
    assert all(any(params[n] is p for p in decay) for n in QK)
    before = {n: params[n].detach().clone() for n in QK}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}], lr=1e-2)
    x = torch.from_numpy(tokens(2, 16, 3))
    model(x, x)[1].backward()
    opt.step()
    assert all(not torch.equal(params[n], before[n]) for n in QK)


def test_meta_build_and_reset_parameters_give_the_frozen_draw() -> None:
    cfg = small_config("orthogonal-trained", frozen_seed=7)
    direct, meta = GPT(cfg, seed=0), GPT(cfg, device="meta")
    meta.to_empty(device="cpu")
    for m in meta.modules():
        if isinstance(m, DrawnInitLinear):
            m.reset_parameters()
    got, want = dict(meta.named_parameters()), dict(direct.named_parameters())
    for name in QK:
        assert torch.equal(got[name], want[name]), name
    attn = OrthogonalAttention(16, 2, variant="orthogonal-trained", seed=7, layer=1, bias=True)
    assert isinstance(attn.q, DrawnInitLinear) and attn.q.weight.requires_grad
    assert torch.equal(attn.k.weight, frozen_orthogonal_weight(16, 2, seed=7, tensor=3))
    assert torch.equal(attn.k.weight, want["h.1.attn.k.weight"])


def test_it_exports_as_a_plain_gpt2_that_loads_back_as_softmax(tmp_path) -> None:
    model = GPT(small_config("orthogonal-trained"), seed=3).eval()
    model.to_hf(tmp_path / "gpt")
    assert "orthoformer" not in json.loads((tmp_path / "gpt" / "config.json").read_text())
    back = GPT.from_hf(tmp_path / "gpt").eval()
    assert back.config.attention == "softmax"
    x = torch.from_numpy(tokens(2, 16, 1))
    with torch.no_grad():
        assert torch.equal(model(x)[0], back(x)[0])


def test_llama_and_freeze_qk_refuse_it_in_one_line() -> None:
    with pytest.raises(ValueError, match="orthogonal-trained") as e:
        Llama(LlamaConfig(60, 32, 64, 2, 4, attention="orthogonal-trained"))
    assert "\n" not in str(e.value)
    transformers = pytest.importorskip("transformers")
    from orthoformer.torch import freeze_qk_

    cfg = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=32, n_positions=16)
    with pytest.raises(ValueError, match="orthogonal-trained") as e:
        freeze_qk_(transformers.GPT2LMHeadModel(cfg), "orthogonal-trained", seed=1)
    assert "\n" not in str(e.value)
