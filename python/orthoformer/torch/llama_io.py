"""Reading and writing the Hugging Face folders of :class:`~orthoformer.torch.llama.Llama`
(Llama and Qwen2): ``config.json`` and ``model.safetensors`` (or shards listed in
``model.safetensors.index.json``) under ``transformers``' tensor names. Every tensor of a
folder is read or refused by name; none the model needs may be missing."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import torch

from ..validate import InputError, mapping, safetensors_file
from .gpt2_io import export_folder
from .llama import MARKER, Llama, dense_bias, dense_qk, hf_name, pin_frozen

INDEX = "model.safetensors.index.json"
#: Tensors ``transformers`` may store that the model computes itself.
IGNORED_SUFFIXES = (".self_attn.rotary_emb.inv_freq",)


def read_folder(folder: pathlib.Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """``config.json`` (parsed) and every tensor of a folder."""
    cfg = folder / "config.json"
    if not cfg.is_file():
        raise InputError(f"{folder} has no config.json: pass a Hugging Face Llama folder")
    try:
        hf = dict(mapping("config.json", json.loads(cfg.read_text())))
    except json.JSONDecodeError as e:
        raise InputError(f"{cfg}: not JSON ({e})") from None
    single, index = folder / "model.safetensors", folder / INDEX
    if single.is_file():
        return hf, safetensors_file(single, "torch")
    if index.is_file():
        weight_map = mapping(f"{INDEX}: weight_map", json.loads(index.read_text()).get("weight_map"))
        tensors: dict[str, torch.Tensor] = {}
        for shard in sorted(set(weight_map.values())):
            path = folder / shard
            if pathlib.Path(shard).name != shard or not path.is_file():
                raise InputError(f"{INDEX} lists shard {shard!r}, which is not a file of {folder}")
            tensors.update(safetensors_file(path, "torch"))
        return hf, tensors
    raise InputError(f"{folder} has neither model.safetensors nor {INDEX}")


def load_into(model: Llama, tensors: dict[str, torch.Tensor], *, restore: bool) -> None:
    """Copies a folder's tensors into ``model``: every parameter by ``transformers``' name
    (missing ones refused). Q/K weights of projections that are not trainable are dropped
    (frozen from the seed) and their biases start at zero (as
    :func:`~orthoformer.torch.freeze_qk_` starts them), unless ``restore`` (a marked folder),
    when stored frozen values and biases are kept. Tied keys take the queries' bias; the
    folder's copy under ``k_proj`` is dropped with its weight."""
    params = {hf_name(n): p for n, p in model.named_parameters()}
    qk = {
        f"model.layers.{i}.self_attn.{w}_proj.weight": (layer.self_attn, w)
        for i, layer in enumerate(model.layers)
        for w in ("q", "k")
    }
    # Tied keys have no module of their own: their bias is the queries' (written as a copy).
    dropped = {
        f"model.layers.{i}.self_attn.k_proj.bias"
        for i, layer in enumerate(model.layers)
        if layer.self_attn.k is None and model.config.qkv_bias
    }
    tied = model.lm_head is None
    n_layer = len(model.layers)
    for name in sorted(tensors):
        parts = name.split(".")
        if (
            parts[:2] == ["model", "layers"]
            and parts[2:3]
            and parts[2].isdigit()
            and int(parts[2]) >= n_layer
        ):
            # llama.cpp refuses such files too: dropping the layers would be another model.
            raise InputError(
                f"the weights hold layer {parts[2]} ({name!r}) but config.num_hidden_layers is "
                f"{n_layer}: the extra layers would be dropped; fix config.num_hidden_layers"
            )
    for name in tensors:
        known = name in params or name in qk or name in dropped or name.endswith(IGNORED_SUFFIXES)
        if not known and not (tied and name == "lm_head.weight"):
            raise InputError(f"tensor {name!r} is not one a {model.config.attention} Llama reads")
    missing = sorted(n for n in params if n not in tensors)
    if missing:
        raise InputError(f"the folder lacks {len(missing)} tensors the model needs, first {missing[0]!r}")
    with torch.no_grad():
        for name, p in params.items():
            t = tensors[name]
            if tuple(t.shape) != tuple(p.shape):
                raise InputError(f"tensor {name!r} has shape {tuple(t.shape)}, expected {tuple(p.shape)}")
            p.copy_(t)
        for name, (attn, which) in qk.items():
            mod = getattr(attn, which)
            if not hasattr(mod, "reset_frozen"):
                continue
            if restore and name in tensors:
                pin_frozen(attn, which, tensors[name])
            elif not restore and mod.bias is not None:
                mod.bias.zero_()


def write_folder(model: Llama, folder: pathlib.Path) -> None:
    """``config.json`` and ``model.safetensors`` of ``model`` under ``transformers``' names."""
    from safetensors.torch import save_file

    out = {hf_name(n): p for n, p in model.named_parameters()}
    for i, layer in enumerate(model.layers):
        for which in ("q", "k"):
            out[f"model.layers.{i}.self_attn.{which}_proj.weight"] = dense_qk(layer.self_attn, which)
            bias = dense_bias(layer.self_attn, which)
            if bias is not None:
                out[f"model.layers.{i}.self_attn.{which}_proj.bias"] = bias
    # Own, contiguous CPU copies: safetensors refuses shared storage (tied keys, views).
    tensors = {n: t.detach().to("cpu").contiguous().clone() for n, t in out.items()}
    with export_folder(folder, "hf-llama", "a Hugging Face Llama model (Llama.to_hf)") as files:
        save_file(tensors, str(files.path("model.safetensors")), {"format": "pt"})
        files.path("config.json").write_text(model.config_json())
        files.commit()


__all__ = ["INDEX", "MARKER", "load_into", "read_folder", "write_folder"]
