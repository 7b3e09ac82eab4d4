"""The PyTorch GPT against the Rust one: a checkpoint trained by ``orthoformer train`` gives
the command line's logits (through ``Gpt::logits``) to 1e-5 and its gradients, for every
attention variant and both norm placements; frozen projections are buffers holding the
library's values; the fast Hadamard transform equals its dense matrix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import orthoformer
from orthoformer.config import ATTENTIONS
from orthoformer.torch import GPT
from orthoformer.torch.hadamard import check_dense
from helpers import cli_train, matches_the_library, small_config, tokens

CASES = [(a, n) for a in ATTENTIONS for n in ("pre", "post")]


@pytest.mark.parametrize("attention,norm", CASES)
def test_cli_checkpoint_gives_the_cli_logits_and_gradients(cli, tmp_path, attention, norm) -> None:
    cfg = small_config(attention, norm)
    run = cli_train(cli, tmp_path, cfg, steps=12)
    matches_the_library(
        GPT.from_checkpoint(run), orthoformer.load_checkpoint(run).model, f"{attention}/{norm}"
    )


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_frozen_projections_are_buffers_with_the_library_values(attention) -> None:
    cfg = small_config(attention)
    model = GPT(cfg, seed=5)
    rust = orthoformer.RustGPT(cfg, seed=5)
    names = {n for n, _ in model.named_parameters()}
    assert names == {row[0] for row in rust.table}
    frozen = rust.frozen()
    buffers = model.frozen_buffers()
    assert set(buffers) == set(frozen)
    for name, ft in frozen.items():
        assert not buffers[name].requires_grad
        assert np.array_equal(buffers[name].numpy(), ft.value)
    for name, p in model.named_parameters():
        assert np.array_equal(p.detach().numpy(), rust.params()[name]), name


def test_frozen_weights_never_train_and_never_reach_the_optimizer() -> None:
    model = GPT(small_config("orthogonal"), seed=1)
    before = {n: b.clone() for n, b in model.frozen_buffers().items()}
    decay, rest = model.decay_groups()
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=0.1
    )
    x = torch.from_numpy(tokens(2, 16, 3))
    for _ in range(3):
        opt.zero_grad()
        model(x, x)[1].backward()
        opt.step()
    assert all(torch.equal(before[n], b) for n, b in model.frozen_buffers().items())
    in_opt = {id(p) for g in opt.param_groups for p in g["params"]}
    assert all(id(b) not in in_opt for b in model.buffers())


@pytest.mark.parametrize("c", [16, 24, 48, 384])
def test_fast_hadamard_equals_its_dense_matrix(c) -> None:
    cfg = small_config("orthogonal-hadamard", d_model=c, n_head=2 if c < 384 else 6)
    rust = orthoformer.RustGPT(cfg)
    for ft in rust.frozen().values():
        assert ft.signs is not None
        err = check_dense(
            torch.from_numpy(ft.value.copy()), torch.from_numpy(ft.signs.copy()), torch.from_numpy(ft.perm)
        )
        assert err < 1e-5, f"C={c}: {err}"


@pytest.mark.parametrize("attention", ["softmax", "orthogonal"])
def test_nanogpt_recipe_forms_match_rust(attention) -> None:
    """LayerNorm without β and the exact (erf) GELU, as the nanogpt-cpu recipe trains."""
    cfg = small_config(attention, norm_bias=False, gelu="erf")
    model, rust = GPT(cfg, seed=5), orthoformer.RustGPT(cfg, seed=5)
    assert not any(n.endswith("ln1.bias") for n, _ in model.named_parameters())
    # Weights large enough that the two GELU forms differ in the logits (at init they agree
    # to 1e-7), loaded into both.
    rng = np.random.default_rng(7)
    params = {n: rng.normal(0.0, 0.5, p.shape).astype(np.float32) for n, p in rust.params().items()}
    rust.set_params(params)
    model.load_named(params)
    x = tokens(2, 16, 6)
    with torch.no_grad():
        got = model.eval()(torch.from_numpy(x))[0].numpy()
    assert np.abs(got - rust.logits(x)).max() <= 1e-5


def test_paley_width_hadamard_model_matches_rust() -> None:
    cfg = small_config("orthogonal-hadamard", d_model=24, n_head=2)
    model, rust = GPT(cfg, seed=2), orthoformer.RustGPT(cfg, seed=2)
    x = tokens(2, 16, 4)
    with torch.no_grad():
        got = model.eval()(torch.from_numpy(x))[0].numpy()
    assert np.abs(got - rust.logits(x)).max() <= 1e-5


def test_dropout_sites_train_and_switch_off_in_eval() -> None:
    model = GPT(small_config("softmax", dropout=0.2), seed=0)
    x = torch.from_numpy(tokens(2, 16, 5))
    model.train()
    a, b = model(x)[0], model(x)[0]
    assert not torch.equal(a, b)
    model.eval()
    assert torch.equal(model(x)[0], model(x)[0])


def test_bad_inputs_are_errors() -> None:
    model = GPT(small_config(), seed=0)
    with pytest.raises(ValueError, match="exceeds the model's context"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="not divisible"):
        small_config(n_head=3)
    with pytest.raises(ValueError, match="unknown variant `orthogonal-quadratic`"):
        small_config("orthogonal-quadratic")
    with pytest.raises(ValueError, match="Hadamard"):
        small_config("orthogonal-hadamard", d_model=10)
    with pytest.raises(ValueError):
        orthoformer.GPTConfig.preset("gpt5")


def test_absurd_batches_are_memory_errors_not_aborts() -> None:
    # A huge vocabulary makes the logits of 2M tokens 8 TB: refused before the library
    # allocates anything.
    rust = orthoformer.RustGPT(small_config(vocab_size=1_000_000, d_model=8, d_ff=8), seed=0)
    with pytest.raises(MemoryError):
        rust.logits(np.zeros((125_000, 16), dtype=np.int64))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        rust.logits(np.full((1, 4), 1_000_000))
    with pytest.raises(ValueError, match="token ids must be integers"):
        rust.logits(np.full((1, 4), -1))
