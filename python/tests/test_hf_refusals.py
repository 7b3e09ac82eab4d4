"""Hugging Face models and folders this package cannot read or convert exactly are refused by
name, never a traceback or a silently different model: ``freeze_qk_`` on fused-QKV
(Phi-3) and latent-attention (DeepSeek-V2) models, ``from_hf`` on weights with more layers
than the config declares, and malformed ``orthoformer`` markers."""

from __future__ import annotations

import json
import shutil

import pytest
import transformers

from helpers import small_config, tiny_llama_family
from orthoformer.torch import GPT, Llama, freeze_qk_
from orthoformer.validate import InputError

COMMON = dict(
    vocab_size=50,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=32,
    pad_token_id=0,
    bos_token_id=0,
    eos_token_id=0,
)


def _phi3() -> object:
    return transformers.Phi3ForCausalLM(transformers.Phi3Config(**COMMON))


def _deepseek_v2(q_lora_rank) -> object:
    cfg = transformers.DeepseekV2Config(
        **COMMON,
        q_lora_rank=q_lora_rank,
        kv_lora_rank=16,
        qk_rope_head_dim=4,
        qk_nope_head_dim=4,
        v_head_dim=8,
        first_k_dense_replace=2,
    )
    return transformers.DeepseekV2ForCausalLM(cfg)


@pytest.mark.parametrize(
    "make,words",
    [
        (_phi3, "model_type 'phi3' fuses Q, K and V in one qkv_proj"),
        (lambda: _deepseek_v2(None), "model_type 'deepseek_v2' uses multi-head latent attention"),
        (lambda: _deepseek_v2(8), "model_type 'deepseek_v2' uses multi-head latent attention"),
    ],
    ids=["phi3", "deepseek-v2", "deepseek-v2-q-lora"],
)
def test_freeze_qk_refuses_architectures_without_separate_q_and_k(make, words) -> None:
    model = make()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(InputError, match="unsupported") as e:
        freeze_qk_(model, "orthogonal", seed=1)
    assert words in str(e.value) and "\n" not in str(e.value)
    assert getattr(model.config, "orthoformer", None) is None
    assert all(p.equal(before[n]) for n, p in model.named_parameters())


def _gpt_folder(tmp_path):
    folder = tmp_path / "gpt"
    GPT(small_config("orthogonal"), seed=0).to_hf(folder)
    return folder, json.loads((folder / "config.json").read_text())


def _edited(folder, tmp_path, name, **changes):
    copy = tmp_path / name
    shutil.copytree(folder, copy)
    cfg = json.loads((copy / "config.json").read_text())
    cfg.update(changes)
    (copy / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not ...}))
    return copy


def test_gpt_from_hf_refuses_more_layers_in_the_weights_than_the_config(tmp_path) -> None:
    folder, cfg = _gpt_folder(tmp_path)
    fewer = _edited(folder, tmp_path, "fewer", n_layer=cfg["n_layer"] - 1)
    with pytest.raises(InputError, match=r"the weights hold layer 1 .* but config.n_layer is 1"):
        GPT.from_hf(fewer)
    more = _edited(folder, tmp_path, "more", n_layer=cfg["n_layer"] + 1)
    with pytest.raises(InputError, match="the weights lack tensor 'h.2."):
        GPT.from_hf(more)


def test_llama_from_hf_refuses_more_layers_in_the_weights_than_the_config(tmp_path) -> None:
    hf = tiny_llama_family("llama")
    folder = tmp_path / "llama"
    hf.save_pretrained(folder)
    fewer = _edited(folder, tmp_path, "fewer", num_hidden_layers=1)
    with pytest.raises(InputError, match="the weights hold layer 1 .* but config.num_hidden_layers is 1"):
        Llama.from_hf(fewer)


MARKERS = [
    ("x", "config.orthoformer must be a JSON object"),
    ([1], "config.orthoformer must be a JSON object"),
    ({"attention": 5}, "config.orthoformer.attention must be one of"),
    ({"attention": "orthogonal"}, "config.orthoformer has no 'frozen_method'"),
    ({"attention": "orthogonal", "frozen_method": "qr", "frozen_seed": -1}, "frozen_seed must be"),
    ({"attention": "orthogonal", "frozen_method": "qr", "frozen_seed": 1.5}, "seed must be an integer"),
    ({"attention": "orthogonal", "frozen_method": "qr", "frozen_seed": 1, "x": 1}, "unknown field 'x'"),
]


@pytest.mark.parametrize("marker,message", MARKERS)
def test_a_malformed_marker_is_one_input_error(tmp_path, marker, message) -> None:
    folder, _ = _gpt_folder(tmp_path)
    with pytest.raises(InputError, match=message):
        GPT.from_hf(_edited(folder, tmp_path, "gpt-marked", orthoformer=marker))
    llama = tmp_path / "llama"
    Llama.from_hf(_llama_hf(tmp_path), attention="orthogonal").to_hf(llama)
    with pytest.raises(InputError, match=message):
        Llama.from_hf(_edited(llama, tmp_path, "llama-marked", orthoformer=marker))


def _llama_hf(tmp_path):
    folder = tmp_path / "llama-src"
    if not folder.exists():
        tiny_llama_family("llama").save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"n_embd": ...}, "config.json has no 'n_embd'"),
        ({"n_layer": 2.0}, "config.n_layer must be an integer, got 2.0"),
        ({"n_head": "4"}, "config.n_head must be an integer"),
        ({"layer_norm_epsilon": "x"}, "config.layer_norm_epsilon must be a number"),
    ],
)
def test_gpt_from_hf_config_fields_are_checked_by_name(tmp_path, changes, message) -> None:
    folder, _ = _gpt_folder(tmp_path)
    with pytest.raises(InputError, match=message):
        GPT.from_hf(_edited(folder, tmp_path, "edited", **changes))
