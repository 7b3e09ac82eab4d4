"""Rotary positions and the learned per-head temperature in the PyTorch GPT, against
the Rust one: the same tensors and initial values, the command line's logits and gradients on
its own checkpoints for every kind of query/key projection, the Rust trainer's weights step
for step (each tool resuming the other's run), key/value-cached decoding equal to
recomputation, and clear errors where a form has no such option."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import orthoformer
from conftest import python_module
from orthoformer.torch import GPT, rope
from orthoformer.torch.attention import KVCache, OrthogonalAttention
from orthoformer.torch.generate import cached_logits
from helpers import cli_train, matches_the_library, small_config, tokens

# (attention, norm, position, temperature): every projection kind (trainable, frozen dense,
# tied, identity, Hadamard, linear) with rotary positions, the temperature on each softmax
# kind, and post-LN.
CASES = [
    ("softmax", "pre", "rope", "fixed"),
    ("orthogonal", "pre", "rope", "learned"),
    ("orthogonal", "post", "learned", "learned"),
    ("orthogonal-tied", "pre", "rope", "learned"),
    ("identity-q", "post", "rope", "fixed"),
    ("orthogonal-hadamard", "pre", "rope", "learned"),
    ("orthogonal-linear", "pre", "rope", "fixed"),
    ("linear", "post", "rope", "fixed"),
]


@pytest.mark.parametrize("attention,norm,position,temperature", CASES)
def test_cli_checkpoint_gives_the_cli_logits_and_gradients(
    cli, tmp_path, attention, norm, position, temperature
) -> None:
    cfg = small_config(attention, norm, position=position, temperature=temperature)
    run = cli_train(cli, tmp_path, cfg, steps=12)
    model = GPT.from_checkpoint(run)
    assert model.config.position == position and model.config.temperature == temperature
    if temperature == "learned":
        # Trained at a high rate: far from 1, so loading them is what is tested.
        taus = [b.attn.temperature.detach() for b in model.h]
        assert all(not torch.allclose(t, torch.ones_like(t), atol=1e-3) for t in taus)
    label = f"{attention}/{norm}/{position}/{temperature}"
    matches_the_library(model, orthoformer.load_checkpoint(run).model, label)


def test_tensors_and_initial_values_are_the_librarys() -> None:
    cfg = small_config("orthogonal", position="rope", temperature="learned")
    model, rust = GPT(cfg, seed=4), orthoformer.RustGPT(cfg, seed=4)
    # (As a set: torch lists a module's own tensor before its children's, the library stores
    # the temperature after the projections; everything goes by name.)
    names = {n for n, _ in model.named_parameters()}
    assert names == {row[0] for row in rust.table}
    assert "wpe" not in names and model.wpe is None
    assert "h.1.attn.temperature" in names
    for name, p in model.named_parameters():
        assert np.array_equal(p.detach().numpy(), rust.params()[name]), name
    # The temperature is a 1-D tensor: not weight-decayed, as the library's AdamW has it.
    decay, _ = model.decay_groups()
    assert all(p is not model.h[0].attn.temperature for p in decay)


@pytest.mark.parametrize("attention", ["softmax", "orthogonal-tied", "identity-q"])
def test_cached_decoding_equals_recomputation(attention) -> None:
    cfg = small_config(attention, context=24, position="rope", temperature="learned")
    model = GPT(cfg, seed=1).eval()
    with torch.no_grad():
        for block in model.h:  # temperatures away from 1
            block.attn.temperature.copy_(torch.tensor([1.7, 0.6]))
    x = torch.from_numpy(np.random.default_rng(0).integers(0, 65, (2, 24)))
    caches = [KVCache() for _ in model.h]
    with torch.no_grad():
        full = model(x)[0]
        assert torch.allclose(cached_logits(model, x[:, :10], caches, 0), full[:, 9], atol=1e-5)
        assert torch.allclose(cached_logits(model, x[:, 10:13], caches, 10), full[:, 12], atol=1e-5)
        for t in range(13, 24):
            assert torch.allclose(cached_logits(model, x[:, t : t + 1], caches, t), full[:, t], atol=1e-5)


def test_rope_scores_depend_on_relative_position_only() -> None:
    # q·k of rotated queries and keys is the same when every position shifts by 5: what frozen
    # Q/K see of position is relative. And the rotation keeps norms.
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 2, 7, 8, generator=g, dtype=torch.float64) for _ in range(2))
    scores = []
    for start in (0, 5):
        cos, sin = rope.tables(start, 7, 8, device=torch.device("cpu"), dtype=torch.float64)
        rq, rk = rope.rotate(q, cos, sin), rope.rotate(k, cos, sin)
        assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1))
        scores.append(rq @ rk.transpose(-1, -2))
    assert torch.allclose(scores[0], scores[1], atol=1e-12)
    cos, sin = rope.tables(0, 7, 8, device=torch.device("cpu"), dtype=torch.float64)
    assert torch.equal(rope.rotate(q, cos, sin)[:, :, 0], q[:, :, 0])  # position 0 is not turned
    assert not torch.allclose(scores[0], q @ k.transpose(-1, -2))


def test_python_trainer_matches_the_rust_trainer_and_each_resumes_the_other(cli, tmp_path) -> None:
    rust, py = tmp_path / "rust", tmp_path / "py"
    args = [
        "--preset", "tiny", "--attention", "orthogonal", "--position", "rope", "--temperature", "learned",
        "--context", 16, "--steps", 20, "--batch", 4, "--lr", 1e-2, "--warmup", 2,
        "--eval-every", 10, "--eval-iters", 2, "--seed", 3,
    ]  # fmt: skip
    cli("train", *args, "--out", rust)
    p = python_module("orthoformer.train", *args, "--out", py)
    assert p.returncode == 0, p.stderr[-3000:]
    a, b = orthoformer.load_checkpoint(rust), orthoformer.load_checkpoint(py)
    assert a.config.position == b.config.position == "rope"
    assert set(a.params) == set(b.params) and "wpe" not in a.params
    assert max(float(np.abs(a.params[k] - b.params[k]).max()) for k in a.params) < 1e-4
    cli("train", "--out", py, "--resume", "--steps", 22)
    p = python_module("orthoformer.train", "--out", rust, "--resume", "--steps", 22)
    assert p.returncode == 0, p.stderr[-3000:]
    # Resuming as another model is refused in one line.
    p = python_module("orthoformer.train", "--out", py, "--resume", "--position", "learned")
    assert p.returncode == 2 and 'position is "rope" in the checkpoint but "learned" was asked' in p.stderr


def test_forms_without_the_option_are_clear_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="linear attention"):
        small_config("linear", temperature="learned")
    with pytest.raises(ValueError, match="linear attention"):
        OrthogonalAttention(16, 2, variant="orthogonal-linear", learned_temperature=True)
    with pytest.raises(ValueError, match="must be even"):
        OrthogonalAttention(6, 2, rope=True)
    with pytest.raises(ValueError, match="only models with learned positions"):
        GPT(small_config("softmax", position="rope"), seed=0).to_hf(tmp_path / "hf")


def test_module_on_meta_resets_its_temperature() -> None:
    attn = OrthogonalAttention(16, 2, seed=1, rope=True, learned_temperature=True, device="meta")
    attn.to_empty(device="cpu")
    attn.reset_frozen()
    attn.reset_parameters()
    assert torch.equal(attn.temperature.detach(), torch.ones(2))
    x = torch.from_numpy(tokens(2, 5, 0)).float()[..., None].expand(2, 5, 16).contiguous()
    assert attn(x).shape == (2, 5, 16)
