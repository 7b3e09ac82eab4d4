"""transformers 5 keeps RoPE's base and scaling under ``rope_parameters``; a review found a
θ = 100 model scored with θ = 10000 and a Llama-3-scaled config run unscaled. Both the
PyTorch Llama (:class:`~orthoformer.torch.llama_config.LlamaConfig`) and the engine
(``orthoformer eval``) read the base, refuse scaling in either spelling (``rope_parameters``,
``rope_scaling``) and refuse two bases that disagree; the engine also refuses mistyped and
unknown fields and tensors of layers beyond ``num_hidden_layers``, by name."""

from __future__ import annotations

import json
import math
import pathlib

import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

from orthoformer.torch.llama import Llama
from orthoformer.torch.llama_config import LlamaConfig
from orthoformer.validate import InputError

WORDS = [f"w{i}" for i in range(95)]
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32,
    "rope_theta": 100.0,
}


def tiny(theta: float, layers: int = 2) -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=len(WORDS) + 1,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=theta,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1 + 0.3 * torch.randn_like(p) if "norm" in name else 0.15 * torch.randn_like(p))
    return model


def save(model: transformers.LlamaForCausalLM, folder: pathlib.Path, **kw) -> pathlib.Path:
    model.save_pretrained(folder, safe_serialization=True, **kw)
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def edit(folder: pathlib.Path, **change) -> None:
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    cfg.update(change)
    path.write_text(json.dumps(cfg))


def text_ids(n: int = 64) -> tuple[str, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(1, len(WORDS) + 1, (1, n), generator=g)
    return " ".join(WORDS[i - 1] for i in ids[0].tolist()), ids


def test_transformers_5_theta_is_what_the_engine_and_our_llama_score(cli_json, tmp_path) -> None:
    hf = tiny(100.0)
    folder = save(hf, tmp_path / "m")
    assert json.loads((folder / "config.json").read_text())["rope_parameters"]["rope_theta"] == 100.0
    text, x = text_ids()
    with torch.no_grad():
        want = hf(input_ids=x, labels=x).loss.item()
    (tmp_path / "t.txt").write_text(text)
    r = cli_json("eval", "--model", folder, "--data", tmp_path / "t.txt", "--context", 64)
    assert abs(r["report"]["loss"] - want) <= 1e-5, (r["report"]["loss"], want)
    ours = Llama.from_hf(folder)
    assert ours.config.rope_theta == 100.0
    with torch.no_grad():
        logits = ours.eval()(x)[0]
    got = torch.nn.functional.cross_entropy(logits[0, :-1], x[0, 1:]).item()
    assert math.isclose(got, want, abs_tol=1e-5), (got, want)


def test_rope_scaling_and_disagreement_are_refused_in_either_spelling(cli, tmp_path) -> None:
    base = tiny(100.0).config.to_dict()
    cases = {
        "rope_parameters.rope_type 'llama3'": {"rope_parameters": LLAMA3},
        "rope_scaling.rope_type 'llama3'": {"rope_parameters": None, "rope_scaling": LLAMA3},
        "rope_parameters.factor": {"rope_parameters": {"rope_type": "default", "factor": 2.0}},
        "rope_scaling.type 'linear'": {"rope_scaling": {"type": "linear", "factor": 2.0}},
        "rope_theta 10000.0 and rope_parameters.rope_theta 100.0 disagree": {"rope_theta": 1e4},
        "rope_parameters.rope_theta 100.0 and rope_scaling.rope_theta 5.0 disagree": {
            "rope_scaling": {"rope_type": "default", "rope_theta": 5.0}
        },
        "rope_parameters.rope_theta must be a number": {"rope_parameters": {"rope_theta": "100"}},
        "head_dim must be an integer": {"head_dim": 8.0},
        "attention_bias must be true or false": {"attention_bias": "true"},
    }
    for message, change in cases.items():
        with pytest.raises(InputError, match=message.replace("(", r"\(")):
            LlamaConfig.from_hf_dict({**base, **change})
    agree = {**base, "rope_theta": 100.0, "rope_scaling": {"rope_type": "default"}}
    assert LlamaConfig.from_hf_dict(agree).rope_theta == 100.0
    # The engine refuses the same configurations, naming the same field.
    folder = save(tiny(100.0), tmp_path / "m")
    original = (folder / "config.json").read_text()
    for field, change in [
        ("rope_parameters.rope_type", {"rope_parameters": LLAMA3}),
        ("rope_scaling.rope_type", {"rope_parameters": None, "rope_scaling": LLAMA3}),
        ("disagree", {"rope_theta": 1e4}),
        ("head_dim must be a non-negative integer", {"head_dim": 8.0}),
        ("sliding_window must be a non-negative integer", {"sliding_window": 4.0}),
        ("unknown field foo_bar", {"foo_bar": 1}),
    ]:
        (folder / "config.json").write_text(original)
        edit(folder, **change)
        p = cli("eval", "--model", folder, "--max-tokens", 16, "--context", 16, check=False)
        assert p.returncode == 2 and field in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


def test_layers_beyond_num_hidden_layers_are_refused_by_name(cli, tmp_path) -> None:
    for name, kw in [("one", {}), ("shards", {"max_shard_size": "20KB"})]:
        folder = save(tiny(100.0, layers=2), tmp_path / name, **kw)
        assert (folder / "model.safetensors").exists() == (name == "one")
        edit(folder, num_hidden_layers=1)
        p = cli("eval", "--model", folder, "--max-tokens", 16, "--context", 16, check=False)
        assert p.returncode == 2, p.stderr
        assert "tensor model.layers.1." in p.stderr and "belongs to layer 1" in p.stderr, p.stderr
        assert "num_hidden_layers declares 1 layers" in p.stderr, p.stderr
