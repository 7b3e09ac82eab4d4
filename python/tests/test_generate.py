"""``GPT.generate``: greedy output equals ``orthoformer generate --temperature 0`` on the same
checkpoint; the key/value cache gives the logits a full recomputation gives; sampling
options behave (top-k 1 is greedy, a generator replays, bad settings are errors).
``orthoformer.generate`` is the library's generate operation, as the command line runs it:
the same text for the same seed, the same empty-prompt rule, and the same message for the
same bad request."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import orthoformer
from conftest import smollm2
from orthoformer import Data
from orthoformer.torch import GPT
from orthoformer.torch.attention import KVCache
from orthoformer.torch.generate import cached_logits
from helpers import cli_train, same_message, small_config

PROMPT = "ROMEO:\nWhat"


@pytest.mark.parametrize("attention", ["softmax", "orthogonal", "orthogonal-hadamard", "orthogonal-linear"])
def test_greedy_generation_equals_the_cli(cli, tmp_path, attention) -> None:
    cfg = small_config(attention, context=32)
    run = cli_train(cli, tmp_path, cfg, steps=20)
    new = 32 - len(PROMPT)  # prompt and continuation fill the context exactly
    out = cli(
        "generate",
        "--checkpoint",
        run,
        "--prompt",
        PROMPT,
        "--max-new-tokens",
        new,
        "--temperature",
        0,
        "--json",
    )
    want = json.loads(out.stdout)["text"]
    data = Data(context=32)
    model = GPT.from_checkpoint(run)
    idx = torch.from_numpy(data.encode(PROMPT).astype(np.int64))[None]
    got = model.generate(idx, new, temperature=0)
    assert got.shape == (1, len(PROMPT) + new)
    text = data.decode(got[0, len(PROMPT) :].numpy())
    assert want.endswith(text) and len(text) == new, (want, text)


@pytest.mark.parametrize("attention", ["softmax", "identity-q", "orthogonal-tied"])
def test_cached_decoding_equals_recomputation(attention) -> None:
    model = GPT(small_config(attention, context=24), seed=1).eval()
    x = torch.from_numpy(np.random.default_rng(0).integers(0, 65, (2, 24)))
    caches = [KVCache() for _ in model.h]
    with torch.no_grad():
        full = model(x)[0]
        first = cached_logits(model, x[:, :10], caches, 0)
        assert torch.allclose(first, full[:, 9], atol=1e-5)
        chunk = cached_logits(model, x[:, 10:13], caches, 10)  # several positions at once
        assert torch.allclose(chunk, full[:, 12], atol=1e-5)
        for t in range(13, 24):
            step = cached_logits(model, x[:, t : t + 1], caches, t)
            assert torch.allclose(step, full[:, t], atol=1e-5)


def test_sampling_options() -> None:
    model = GPT(small_config("orthogonal"), seed=2)
    idx = torch.zeros(3, 2, dtype=torch.long)
    greedy = model.generate(idx, 20, temperature=0)  # past the context (16): the window slides
    assert greedy.shape == (3, 22)
    assert torch.equal(model.generate(idx, 20, temperature=1.0, top_k=1), greedy)
    assert torch.equal(model.generate(idx, 20, temperature=0.7, top_p=1e-9), greedy)
    g = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    a = model.generate(idx, 12, temperature=1.0, top_k=10, top_p=0.9, generator=g())
    assert torch.equal(a, model.generate(idx, 12, temperature=1.0, top_k=10, top_p=0.9, generator=g()))
    assert model.training  # generate restores the mode it found
    with pytest.raises(ValueError, match="temperature"):
        model.generate(idx, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="top_p"):
        model.generate(idx, 2, top_p=0.0)
    with pytest.raises(ValueError, match="non-empty"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), 2)


def test_the_library_generation_is_the_command_lines(cli, tmp_path) -> None:
    """Same checkpoint, prompt and seed: the same text and counts, sampled or greedy; an empty
    prompt starts from id 0 (a checkpoint declares no beginning-of-sequence token)."""
    run = cli_train(cli, tmp_path, small_config("orthogonal", context=32), steps=5)
    for prompt, extra in [(PROMPT, {"temperature": 0.8, "top_k": 10, "seed": 3}), ("", {"temperature": 0})]:
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in extra.items()]
        want = json.loads(
            cli(
                "generate", "--checkpoint", run, "--prompt", prompt, "--max-new-tokens", 20, *flags, "--json"
            ).stdout
        )
        got = orthoformer.generate(prompt, checkpoint=run, max_new_tokens=20, **extra)
        for key in ("prompt", "text", "prompt_tokens", "new_tokens", "stopped_on_eos"):
            assert got[key] == want[key], (key, got, want)
    assert got["prompt_tokens"] == 1 and len(got["text"]) == 20


def test_the_command_line_and_python_refuse_the_same_inputs_alike(cli, tmp_path) -> None:
    """Both front ends call the library's one generate operation: the same bad request gives
    the same one-line message (flags in one, keywords in the other)."""
    never = tmp_path / "no-such-checkpoint"
    cases = [
        ({"temperature": float("nan")}, ["--temperature", "NaN"]),
        ({"temperature": -1.0}, ["--temperature=-1"]),
        ({"top_p": 0.0}, ["--top-p", "0"]),
        ({"top_p": 1.5}, ["--top-p", "1.5"]),
        # Read past the checks of the request itself: the checkpoint must exist.
        ({}, []),
    ]
    for kwargs, flags in cases:
        p = cli("generate", "--checkpoint", never, "--prompt", "a", *flags, check=False)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        with pytest.raises((ValueError, OSError)) as e:
            orthoformer.generate("a", checkpoint=never, **kwargs)
        same_message(p.stderr, str(e.value))
    with pytest.raises(ValueError, match="one of them"):
        orthoformer.generate("a", checkpoint=never, model=never)


def test_a_pretrained_model_is_refused_and_run_alike(cli) -> None:
    """A continuation past SmolLM2's context is refused after loading by both; an empty prompt
    starts from its beginning-of-sequence token in both."""
    model = smollm2()
    p = cli("generate", "--model", model, "--prompt", "The", "--max-new-tokens", 1 << 20, check=False)
    assert p.returncode == 2 and "exceed the model's context" in p.stderr, p.stderr
    with pytest.raises(ValueError) as e:
        orthoformer.generate("The", model=model, max_new_tokens=1 << 20)
    same_message(p.stderr, str(e.value))
    want = json.loads(
        cli("generate", "--model", model, "--max-new-tokens", 4, "--temperature", 0, "--json").stdout
    )
    got = orthoformer.generate(model=model, max_new_tokens=4, temperature=0)
    assert got["prompt_tokens"] == want["prompt_tokens"] == 1
    assert got["text"] == want["text"]


def test_q8_dot_products_run_alike_and_bad_names_are_refused_alike(cli) -> None:
    """`dot="q8"` (integer dot products with 8-bit activations) gives both front ends the
    same greedy text on SmolLM2 (Q4_1 and Q8_0 weights); an unknown name is refused by both."""
    model = smollm2()
    want = json.loads(
        cli(
            "generate",
            "--model",
            model,
            "--prompt",
            "The",
            "--max-new-tokens",
            6,
            "--temperature",
            0,
            "--dot",
            "q8",
            "--json",
        ).stdout
    )
    got = orthoformer.generate("The", model=model, max_new_tokens=6, temperature=0, dot="q8")
    assert got["text"] == want["text"] and got["new_tokens"] == want["new_tokens"] > 0
    p = cli("generate", "--model", model, "--dot", "q4", check=False)
    assert p.returncode == 2 and "--dot" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    with pytest.raises(ValueError, match="dot"):
        orthoformer.generate(model=model, dot="q4")
