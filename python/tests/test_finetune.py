"""``orthoformer.finetune`` on a tiny random Llama: the three modes train what they say (Q/K
frozen at their values, or replaced by frozen orthogonal ones), see the same batches, count
their trainable parameters exactly, and the command line runs each mode in its own process
and refuses bad input in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import python_module
from orthoformer import finetune as ft
from orthoformer.torch.frozen import FrozenOrthogonalLinear
from test_prepare import TEXT, hf_tokenizer_json

try:
    import transformers
except ImportError:
    pytest.fail("these tests need the transformers package (pip install transformers)")

VOCAB = 300


def tiny_llama() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(cfg)


def tokens() -> tuple[np.ndarray, np.ndarray]:
    # A repeating pattern the model can learn in a few steps.
    ids = np.tile(np.arange(17, dtype=np.int64) * 7 % VOCAB, 200)
    return ft.split_tokens(ids)


def run(mode: str, steps: int = 8) -> tuple[torch.nn.Module, dict]:
    model = tiny_llama()
    train, val = tokens()
    r = ft.finetune(
        model, train, val, mode, steps=steps, context=16, batch=4, lr=3e-3, warmup=2, val_windows_n=4
    )
    return model, r


def test_modes_train_what_they_say() -> None:
    start = tiny_llama()
    full, rf = run("full")
    pre, rp = run("qk-pretrained")
    orth, ro = run("qk-orthogonal")
    qk = sum(
        layer.self_attn.q_proj.weight.numel() + layer.self_attn.k_proj.weight.numel()
        for layer in start.model.layers
    )
    total = sum(p.numel() for p in start.parameters())
    assert rf["trainable"] == total and rp["trainable"] == ro["trainable"] == total - qk
    assert rf["total"] == rp["total"] == ro["total"] == total
    # Same model before training: the same validation loss; the orthogonal Q/K change it.
    assert rf["val_loss_before"] == rp["val_loss_before"] != ro["val_loss_before"]
    # Training helps every mode on this pattern.
    for r in (rf, rp, ro):
        assert r["val_loss_after"] < r["val_loss_before"] - 0.1, r
    for a, b, c, s in zip(start.model.layers, pre.model.layers, orth.model.layers, full.model.layers):
        # Frozen at pretrained values: Q/K unchanged, V trained.
        assert torch.equal(a.self_attn.q_proj.weight, b.self_attn.q_proj.weight)
        assert torch.equal(a.self_attn.k_proj.weight, b.self_attn.k_proj.weight)
        assert not torch.equal(a.self_attn.v_proj.weight, b.self_attn.v_proj.weight)
        # Full fine-tuning moves Q too.
        assert not torch.equal(a.self_attn.q_proj.weight, s.self_attn.q_proj.weight)
        # Orthogonal: frozen buffers with orthonormal rows per head, never trained.
        q = c.self_attn.q_proj
        assert isinstance(q, FrozenOrthogonalLinear) and not q.weight.requires_grad
        w = q.weight.detach().reshape(4, 8, 32)
        eye = torch.eye(8).expand(4, 8, 8)
        assert torch.allclose(w @ w.transpose(1, 2), eye, atol=1e-5)
    assert rf["ms_per_step"] > 0 and rf["peak_rss_mib"] > 0


def test_same_batches_in_every_mode() -> None:
    # With lr 0 nothing moves: the training loss is a function of the batches alone, so equal
    # figures mean equal batches (full vs qk-pretrained share the model).
    model_a, model_b = tiny_llama(), tiny_llama()
    train, val = tokens()
    kw = dict(steps=3, context=16, batch=2, lr=0.0, warmup=1, val_windows_n=2)
    a = ft.finetune(model_a, train, val, "full", **kw)
    b = ft.finetune(model_b, train, val, "qk-pretrained", **kw)
    assert a["train_loss_last10"] == b["train_loss_last10"]
    c = ft.finetune(tiny_llama(), train, val, "full", **{**kw, "seed": 1})
    assert c["train_loss_last10"] != a["train_loss_last10"]


def test_curve_validates_every_n_steps() -> None:
    train, val = tokens()
    kw = dict(steps=8, context=16, batch=4, lr=3e-3, warmup=2, val_windows_n=4)
    r = ft.finetune(tiny_llama(), train, val, "full", eval_every=3, **kw)
    assert [p["step"] for p in r["curve"]] == [0, 3, 6, 8]
    assert r["curve"][0]["val_loss"] == r["val_loss_before"]
    assert r["curve"][-1]["val_loss"] == r["val_loss_after"]
    # Evaluating between steps changes nothing the training sees.
    plain = ft.finetune(tiny_llama(), train, val, "full", **kw)
    assert plain["val_loss_after"] == r["val_loss_after"]
    assert [p["step"] for p in plain["curve"]] == [0, 8]
    with pytest.raises(ValueError, match="eval_every"):
        ft.finetune(tiny_llama(), train, val, "full", eval_every=-1, **kw)


def test_bad_requests() -> None:
    with pytest.raises(ValueError, match="mode must be"):
        ft.prepare_mode_(tiny_llama(), "qk-random")
    train, val = tokens()
    with pytest.raises(ValueError, match="shorter than one window"):
        ft.finetune(tiny_llama(), train, val[:5], "full", steps=1, context=16, batch=1)


def test_command_line_runs_each_mode_in_its_own_process(tmp_path) -> None:
    folder = tmp_path / "hf"
    tiny_llama().save_pretrained(folder)
    (folder / "tokenizer.json").write_text(hf_tokenizer_json(TEXT[:20_000], vocab=VOCAB))
    text = tmp_path / "text.txt"
    text.write_text(TEXT[:20_000])
    out = tmp_path / "report.json"
    args = ["--model", folder, "--data", text, "--modes", "full,qk-orthogonal,lora", "--steps", 2]
    lora = ["--lora-rank", 2, "--lora-targets", "q_proj,v_proj"]
    p = python_module("orthoformer.finetune", *args, *lora, "--context", 16, "--batch", 2, "--out", out)
    assert p.returncode == 0, p.stderr
    reports = json.loads(out.read_text())
    assert [r["mode"] for r in reports] == ["full", "qk-orthogonal", "lora"]
    assert reports[0]["trainable"] > reports[1]["trainable"] > reports[2]["trainable"]
    # Rank 2 on q (32 x 32) and v (16 x 32) of two layers.
    assert reports[2]["trainable"] == 2 * 2 * ((32 + 32) + (16 + 32))
    assert reports[2]["lora"] == {"rank": 2, "alpha": 16.0, "targets": ["q_proj", "v_proj"]}
    assert reports[2]["update_rank"]["modules"] == 4 and "update_rank" in reports[0]
    assert "| qk-orthogonal |" in p.stdout and "| lora |" in p.stdout
    bad = python_module("orthoformer.finetune", "--model", tmp_path, "--data", text)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "orthoformer rotate" in bad.stderr
    bad = python_module("orthoformer.finetune", *args[:4], "--modes", "lora2")
    assert bad.returncode == 2 and "'lora2'" in bad.stderr
    for flag, value in (("--lora-rank", 0), ("--lora-alpha", 0), ("--lora-targets", "q_proj,lm_head")):
        bad = python_module("orthoformer.finetune", *args[:4], flag, value)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and flag in bad.stderr, bad.stderr
    bad = python_module("orthoformer.finetune", *args[:4], "--eval-every", -1)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--eval-every" in bad.stderr
