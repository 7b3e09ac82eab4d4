"""Small configurations and CLI-trained checkpoints shared by the model and trainer tests."""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any, Callable

import numpy as np
import pytest
import torch

from orthoformer import GPTConfig


def small_config(attention: str = "softmax", norm: str = "pre", d_model: int = 16, **kw: Any) -> GPTConfig:
    """A 2-layer, 2-head model over TinyShakespeare's 65 characters, context 16."""
    fields = dict(
        vocab_size=65,
        context=16,
        n_layer=2,
        n_head=2,
        d_model=d_model,
        d_ff=2 * d_model,
        attention=attention,
        norm=norm,
        attn_bias=True,
        ffn_bias=True,
        dropout=0.0,
        frozen_method="qr",
        frozen_seed=3,
    )
    fields.update(kw)
    return GPTConfig(**fields).validate()


def cli_train(
    cli: Callable[..., Any], tmp: pathlib.Path, cfg: GPTConfig, steps: int = 3, *extra: Any
) -> pathlib.Path:
    """Trains ``cfg`` with ``orthoformer train`` for a few steps at a high rate (so the weights
    are far from their initialisation); returns the checkpoint folder."""
    path = tmp / "config.json"
    path.write_text(cfg.to_json())
    out = tmp / "run"
    cli(
        "train",
        "--config",
        path,
        "--steps",
        steps,
        "--batch",
        4,
        "--lr",
        3e-2,
        "--warmup",
        0,
        "--eval-every",
        steps,
        "--eval-iters",
        1,
        "--out",
        out,
        *extra,
    )
    return out


def read_json(path: pathlib.Path) -> Any:
    """A JSON file's content."""
    return json.loads(path.read_text())


def same_message(cli_err: str, py_err: str) -> None:
    """The command line says flags (``--check-tokens``), Python its keywords
    (``check_tokens``); otherwise the library's one message is the same."""
    assert cli_err.startswith("error: "), cli_err
    as_keywords = re.sub(r"--([a-z][a-z0-9-]*)", lambda m: m.group(1).replace("-", "_"), cli_err[7:])
    assert as_keywords.strip() == py_err.strip(), (cli_err, py_err)


def tokens(b: int, t: int, seed: int) -> np.ndarray:
    """``(b, t)`` random ids of TinyShakespeare's 65 characters."""
    return np.random.default_rng(seed).integers(0, 65, size=(b, t))


def matches_the_library(model: Any, rust: Any, label: str) -> None:
    """The PyTorch GPT ``model`` gives the library model ``rust``'s logits (to 1e-5), loss and
    gradients (to 1e-4 of each tensor's largest) on a fixed batch."""
    x, y = tokens(3, 16, 1), tokens(3, 16, 2)
    want = rust.logits(x)
    model.eval()
    with torch.no_grad():
        got, _ = model(torch.from_numpy(x))
    diff = np.abs(got.numpy() - want).max()
    assert diff <= 1e-5, f"{label}: max |Δlogit| {diff:.2e}"

    rust.zero_grad()
    want_loss = rust.forward_backward(x, y)
    model.train()
    _, loss = model(torch.from_numpy(x), torch.from_numpy(y))
    loss.backward()
    assert float(loss.detach()) == pytest.approx(want_loss, abs=1e-5)
    params = dict(model.named_parameters())
    assert set(params) == set(rust.grads()), label
    for name, g in rust.grads().items():
        mine = params[name].grad.numpy()
        scale = max(np.abs(g).max(), 1e-3)
        assert np.abs(mine - g).max() <= 1e-4 * scale, f"{label}: gradient of {name}"


def tiny_llama_family(kind: str) -> torch.nn.Module:
    """A tiny random ``transformers`` Llama, Mistral or Qwen2 (width 32, 4 heads, 2 key/value
    heads, 2 layers, vocabulary 50) in eval mode, the same for a given ``kind``."""
    import transformers

    torch.manual_seed(0)
    common = dict(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    if kind == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**common)).eval()
    if kind == "mistral":
        return transformers.MistralForCausalLM(transformers.MistralConfig(**common)).eval()
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common)).eval()


TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bpe_tokenizer(text: str) -> Any:
    """A byte-level BPE of 300 tokens trained on ``text`` with SmolLM's pre-tokenizer (single
    digits, then GPT-2's byte-level regex) and three special tokens, as transformers wraps it."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([text], trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>", unk_token="<|endoftext|>"
    )
    fast.chat_template = TEMPLATE
    return fast


def tiny_bpe_llama_folder(tmp_path: pathlib.Path, vocab_extra: int = 20) -> tuple[pathlib.Path, Any]:
    """A random 2-layer Llama (width 64) and :func:`bpe_tokenizer` saved by transformers in
    ``tmp_path/hf`` (embedding ``vocab_extra`` rows beyond the tokenizer), the text it was
    trained on in ``tmp_path/t.txt``; returns the folder and the tokenizer."""
    import transformers

    text = "To be, or not to be, that is the question: 1234 whether 'tis nobler. " * 40
    tok = bpe_tokenizer(text)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok) + vocab_extra,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    out = tmp_path / "hf"
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    (tmp_path / "t.txt").write_text(text)
    return out, tok
