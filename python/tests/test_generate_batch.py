"""``orthoformer.generate_batch``: several prompts decoded in one batch.
Sequence ``i`` of the batch is the text ``orthoformer.generate`` makes with seed ``seed + i``
(integer products on SmolLM2; a checkpoint's GPT steps its sequences one after another);
the command line (``generate --prompt A --prompt B --parallel N``) reports the same batch;
bad batches are refused by both front ends with the same one-line message."""

from __future__ import annotations

import json

import pytest

import orthoformer
from conftest import smollm2
from helpers import cli_train, same_message, small_config


def test_a_batch_makes_the_texts_of_single_generations_on_smollm2(cli) -> None:
    model = smollm2()
    prompts = ["The king said", "Once upon a time"]
    opts = {"max_new_tokens": 12, "temperature": 0.8, "top_k": 40, "seed": 3}
    got = orthoformer.generate_batch(prompts, parallel=2, model=model, **opts)
    seqs = got["sequences"]
    assert [s["seed"] for s in seqs] == [3, 4, 5, 6]
    assert [s["prompt"] for s in seqs] == [prompts[0]] * 2 + [prompts[1]] * 2
    for i, s in enumerate(seqs):
        one = orthoformer.generate(s["prompt"], model=model, **{**opts, "seed": 3 + i})
        for key in ("text", "prompt_tokens", "new_tokens", "stopped_on_eos"):
            assert s[key] == one[key], (i, key, s, one)
    assert got["decode_tokens_per_s"] > 0 and got["prompt_tokens_per_s"] > 0
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in opts.items()]
    p = cli(
        "generate",
        "--model",
        model,
        "--prompt",
        prompts[0],
        "--prompt",
        prompts[1],
        "--parallel",
        2,
        *flags,
        "--json",
    )
    assert [s["text"] for s in json.loads(p.stdout)["sequences"]] == [s["text"] for s in seqs]
    text = cli("generate", "--model", model, "--prompt", prompts[0], "--parallel", 2, *flags).stdout
    assert text.startswith("--- sequence 0 (seed 3) ---\n" + prompts[0] + seqs[0]["text"]), text


def test_a_checkpoint_batch_equals_its_single_generations(cli, tmp_path) -> None:
    run = cli_train(cli, tmp_path, small_config("orthogonal", context=32), steps=5)
    got = orthoformer.generate_batch(["ROMEO:", ""], checkpoint=run, max_new_tokens=8, seed=1)
    for i, s in enumerate(got["sequences"]):
        one = orthoformer.generate(s["prompt"], checkpoint=run, max_new_tokens=8, seed=1 + i)
        assert s["text"] == one["text"] and s["new_tokens"] == 8


def test_bad_batches_are_refused_alike(cli, tmp_path) -> None:
    never = tmp_path / "no-such-checkpoint"
    cases = [
        ({"parallel": 0}, ["--parallel", "0"]),
        ({"parallel": 600}, ["--prompt", "b", "--parallel", "600"]),
        ({"dot": "q8"}, ["--prompt", "b", "--dot", "q8"]),
    ]
    for kwargs, flags in cases:
        p = cli("generate", "--checkpoint", never, "--prompt", "a", *flags, check=False)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        prompts = ["a", "b"] if "--prompt" in flags[:1] else ["a"]
        with pytest.raises((ValueError, OSError)) as e:
            orthoformer.generate_batch(prompts, checkpoint=never, **kwargs)
        if kwargs.get("parallel") != 0:  # Python checks `parallel` >= 1 before the library
            same_message(p.stderr, str(e.value))
    for bad in ["one text", [1, 2], []]:
        with pytest.raises(ValueError, match="prompts"):
            orthoformer.generate_batch(bad, checkpoint=never)
