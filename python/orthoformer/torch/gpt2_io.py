"""The library's GPT to and from a Hugging Face GPT-2 folder (``config.json`` and
``model.safetensors`` under ``transformers``' names), without ``transformers``:
:func:`from_hf` loads GPT-2 weights into :class:`~orthoformer.torch.GPT` (softmax, or with
Q/K frozen), :func:`to_hf` writes one, frozen matrices included, with the marker
``"orthoformer": {attention, frozen_method, frozen_seed}`` in ``config.json`` that
:func:`~orthoformer.torch.freeze_qk_` and :func:`from_hf` read to freeze them again.

The mapping is that of ``orthoformer export`` (``src/export/gpt2.rs``): ``Conv1D``
weights are ``in x out`` (the transpose of ``nn.Linear``'s), ``c_attn`` fuses ``[W_Q | W_K |
W_V]``, the LM head is tied to ``wte``; tied keys are written as a copy of the queries,
identity queries as the identity, missing biases as zeros.
"""

from __future__ import annotations

import json
import os
import pathlib
from os import PathLike
from typing import Any, Optional, Union

import numpy as np
import torch

from .. import validate
from ..validate import InputError
from ..config import GPTConfig
from ..model import FrozenTensor
from ..outputs import output_folder
from .functional import Device
from .hf import read_marker

PathArg = Union[str, "PathLike[str]"]
MARKER = "orthoformer"
GELU = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh", "gelu": "erf"}


def _read(folder: pathlib.Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``config.json`` and every tensor (``transformer.`` prefix removed) of a folder."""
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise InputError(f"{folder} has no config.json: pass a Hugging Face model folder")
    try:
        parsed = json.loads(cfg_path.read_text())
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise InputError(f"{cfg_path} is not JSON ({validate.one_line(e)})") from None
    hf = dict(validate.mapping(f"{cfg_path}", parsed))
    st, bin_ = folder / "model.safetensors", folder / "pytorch_model.bin"
    if st.is_file():
        raw = validate.safetensors_file(st, "numpy")
    elif bin_.is_file():
        raw = {
            k: v.float().numpy() for k, v in torch.load(bin_, map_location="cpu", weights_only=True).items()
        }
    else:
        raise InputError(f"{folder} has neither model.safetensors nor pytorch_model.bin")
    return hf, {k.removeprefix("transformer."): np.asarray(v, dtype=np.float32) for k, v in raw.items()}


def _int(hf: dict[str, Any], key: str, default: Any = None) -> int:
    """``config.key`` as a positive integer (``default`` when absent and given)."""
    value = hf.get(key, default) if default is not None else validate.field(hf, key, "config.json")
    return validate.integer(f"config.{key}", value, lo=1, hint="fix config.json")


def gpt2_config(hf: dict[str, Any], attention: str, seed: int, method: str) -> GPTConfig:
    """The library's configuration of a GPT-2 ``config.json``; ``ValueError`` for a GPT-2
    this model cannot compute exactly."""
    if hf.get("model_type") != "gpt2":
        raise InputError(f"from_hf reads GPT-2 models, not model_type {hf.get('model_type')!r}")
    act = hf.get("activation_function", "gelu_new")
    eps = validate.number("config.layer_norm_epsilon", hf.get("layer_norm_epsilon", 1e-5), lo=0.0)
    if not isinstance(act, str) or act not in GELU:
        raise InputError(f"GPT-2 activation {act!r} is not one of {', '.join(GELU)}")
    if (
        abs(eps - 1e-5) > 1e-12
        or not hf.get("scale_attn_weights", True)
        or hf.get("scale_attn_by_inverse_layer_idx")
    ):
        raise InputError("only GPT-2s with LayerNorm ε 1e-5 and 1/√D attention scores load exactly")
    c = _int(hf, "n_embd")
    return GPTConfig(
        vocab_size=_int(hf, "vocab_size"),
        context=_int(hf, "n_positions"),
        n_layer=_int(hf, "n_layer"),
        n_head=_int(hf, "n_head"),
        d_model=c,
        d_ff=_int(hf, "n_inner", 4 * c) if hf.get("n_inner") is not None else 4 * c,
        attention=attention,
        norm="pre",
        attn_bias=True,
        ffn_bias=True,
        norm_bias=True,
        gelu=GELU[act],
        dropout=validate.number(
            "config.resid_pdrop", hf.get("resid_pdrop", 0.0), lo=0.0, hi=1.0, hi_open=True
        ),
        frozen_method=method,
        frozen_seed=seed,
    ).validate()


def library_tensors(
    w: dict[str, np.ndarray], cfg: GPTConfig
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """GPT-2 tensors as the library's ``(trainable by name, Q/K weights by name)``."""
    _check_names(w, cfg.n_layer)
    c = cfg.d_model
    out: dict[str, np.ndarray] = {"wte": w["wte.weight"], "wpe": w["wpe.weight"]}
    qk: dict[str, np.ndarray] = {}
    for layer in range(cfg.n_layer):
        h = f"h.{layer}."

        def g(name: str, h: str = h) -> np.ndarray:
            return w[h + name]

        for ours, theirs in (("ln1", "ln_1"), ("ln2", "ln_2")):
            out[h + ours + ".weight"], out[h + ours + ".bias"] = g(theirs + ".weight"), g(theirs + ".bias")
        wa, ba = g("attn.c_attn.weight"), g("attn.c_attn.bias")
        for i, name in enumerate("qkv"):
            (qk if name != "v" else out)[h + f"attn.{name}.weight"] = np.ascontiguousarray(
                wa[:, i * c : (i + 1) * c].T
            )
            out[h + f"attn.{name}.bias"] = ba[i * c : (i + 1) * c]
        out[h + "attn.o.weight"] = np.ascontiguousarray(g("attn.c_proj.weight").T)
        out[h + "attn.o.bias"] = g("attn.c_proj.bias")
        out[h + "mlp.fc.weight"] = np.ascontiguousarray(g("mlp.c_fc.weight").T)
        out[h + "mlp.fc.bias"] = g("mlp.c_fc.bias")
        out[h + "mlp.proj.weight"] = np.ascontiguousarray(g("mlp.c_proj.weight").T)
        out[h + "mlp.proj.bias"] = g("mlp.c_proj.bias")
    out["ln_f.weight"], out["ln_f.bias"] = w["ln_f.weight"], w["ln_f.bias"]
    return out, qk


#: Every layer's GPT-2 tensors, without the ``h.{l}.`` prefix.
LAYER_TENSORS = tuple(
    f"{m}.{p}"
    for m in ("ln_1", "ln_2", "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    for p in ("weight", "bias")
)
#: Buffers ``transformers`` stored in older GPT-2 files (the causal mask), not weights.
MASK_BUFFERS = ("attn.bias", "attn.masked_bias")


def _check_names(w: dict[str, np.ndarray], n_layer: int) -> None:
    """The file's tensors are exactly the config's: none missing, no layer beyond
    ``config.n_layer`` (llama.cpp refuses such files too; dropping them would be a silently
    different model), nothing unknown, an ``lm_head`` only as the tied copy of ``wte``."""
    want = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}
    want |= {f"h.{i}.{t}" for i in range(n_layer) for t in LAYER_TENSORS}
    missing = sorted(want - set(w))
    if missing:
        raise InputError(
            f"the weights lack tensor {missing[0]!r} (of {len(missing)} missing) that config.n_layer "
            f"{n_layer} needs: fix config.n_layer or use another folder"
        )
    for name in sorted(set(w) - want):
        head, _, rest = name.partition(".")
        layer, _, tail = rest.partition(".")
        if head == "h" and layer.isdigit() and (int(layer) >= n_layer):
            raise InputError(
                f"the weights hold layer {layer} ({name!r}) but config.n_layer is {n_layer}: the extra "
                "layers would be dropped; fix config.n_layer"
            )
        if head == "h" and tail in MASK_BUFFERS:
            continue
        if name == "lm_head.weight" and np.array_equal(w[name], w["wte.weight"]):
            continue
        raise InputError(
            f"tensor {name!r} is not one a GPT-2 this model computes holds: remove it or use another folder"
        )


def from_hf(
    cls: Any,
    folder: PathArg,
    *,
    attention: Optional[str] = None,
    frozen_seed: Optional[int] = None,
    frozen_method: Optional[str] = None,
    device: Device = None,
    dtype: Optional[torch.dtype] = None,
) -> Any:
    """A GPT-2 folder as the library's GPT. ``attention`` ``None``: the marker's variant when
    the folder has one (its Q/K frozen again, stored values kept), else ``softmax`` (Q/K
    trainable, loaded); a frozen variant replaces Q/K by frozen matrices from
    ``frozen_seed``/``frozen_method`` (their biases start at zero)."""
    hf, w = _read(pathlib.Path(os.fspath(folder)))
    marker = hf.get(MARKER) if attention is None and frozen_seed is None and frozen_method is None else None
    if marker is not None:
        # Checked before anything is built: a malformed marker is one line naming its field.
        attention, frozen_method, frozen_seed = read_marker(marker)
    seed = 0 if frozen_seed is None else validate.seed("frozen_seed", frozen_seed)
    cfg = gpt2_config(hf, attention or "softmax", seed, frozen_method or "qr")
    tensors, qk = library_tensors(w, cfg)
    model = cls(cfg, device="meta")
    if dtype is not None:
        model.to(dtype)
    # Allocating regenerates the frozen matrices (in `dtype`, on `device`).
    model.to_empty(device=torch.device("cpu") if device is None else device)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    keep = {n: v for n, v in {**tensors, **qk}.items() if n in shapes}
    fresh = cfg.attention != "softmax" and marker is None
    for n in shapes:
        if n not in keep or (fresh and n.endswith(("attn.q.bias", "attn.k.bias"))):
            # Q/K biases of a freshly frozen variant start at zero, as the library starts them.
            keep[n] = np.zeros(shapes[n], np.float32)
    model.load_named(keep)
    if marker is not None:
        frozen = {n: v for n, v in qk.items() if n in model.frozen_buffers()}
        model.adopt_frozen({n: _dense(n, v) for n, v in frozen.items()})
    return model


def _dense(name: str, value: np.ndarray) -> FrozenTensor:
    return FrozenTensor((name, list(value.shape), np.ascontiguousarray(value, "<f4").tobytes(), None))


def to_hf(model: Any, folder: PathArg) -> None:
    """Writes ``model`` as a GPT-2 folder (``config.json``, ``model.safetensors``); frozen
    matrices are written as weights and marked in ``config.json``."""
    from safetensors.numpy import save_file

    cfg: GPTConfig = model.config
    if cfg.is_linear or cfg.norm != "pre":
        raise ValueError(
            f"GPT-2 has no form of {cfg.attention} attention with {cfg.norm}-LN blocks: "
            "only pre-LN softmax-kernel models export"
        )
    if cfg.position != "learned" or cfg.temperature != "fixed":
        raise ValueError(
            f"GPT-2 has no form of {cfg.position} positions with a {cfg.temperature} temperature: "
            "only models with learned positions and a fixed temperature export"
        )
    c = cfg.d_model
    p = model.state_numpy()
    frozen = {n: b.detach().to("cpu", torch.float32).numpy() for n, b in model.frozen_buffers().items()}

    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
        return p.get(name, frozen.get(name, np.zeros(shape, np.float32)))

    out: dict[str, np.ndarray] = {"transformer.wte.weight": p["wte"], "transformer.wpe.weight": p["wpe"]}
    for layer in range(cfg.n_layer):
        h, t = f"h.{layer}.", f"transformer.h.{layer}."
        ws, bs = [], []
        for i, name in enumerate("qkv"):
            kind = cfg.projections()[i] if name != "v" else "trainable"
            if kind == "identity":
                w, b = np.eye(c, dtype=np.float32), np.zeros(c, np.float32)
            elif kind == "tied-to-q":
                w, b = ws[0], bs[0]
            else:
                w, b = get(h + f"attn.{name}.weight", (c, c)), get(h + f"attn.{name}.bias", (c,))
            ws.append(w)
            bs.append(b)
        out[t + "attn.c_attn.weight"] = np.concatenate([x.T for x in ws], axis=1)
        out[t + "attn.c_attn.bias"] = np.concatenate(bs)
        out[t + "attn.c_proj.weight"] = p[h + "attn.o.weight"].T
        out[t + "attn.c_proj.bias"] = get(h + "attn.o.bias", (c,))
        for ours, theirs in (("ln1", "ln_1"), ("ln2", "ln_2")):
            out[t + theirs + ".weight"] = p[h + ours + ".weight"]
            out[t + theirs + ".bias"] = get(h + ours + ".bias", (c,))
        out[t + "mlp.c_fc.weight"] = p[h + "mlp.fc.weight"].T
        out[t + "mlp.c_fc.bias"] = get(h + "mlp.fc.bias", (cfg.d_ff,))
        out[t + "mlp.c_proj.weight"] = p[h + "mlp.proj.weight"].T
        out[t + "mlp.c_proj.bias"] = get(h + "mlp.proj.bias", (c,))
    out["transformer.ln_f.weight"], out["transformer.ln_f.bias"] = p["ln_f.weight"], get("ln_f.bias", (c,))
    hf = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": cfg.vocab_size,
        "n_positions": cfg.context,
        "n_ctx": cfg.context,
        "n_embd": c,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        "n_inner": cfg.d_ff,
        "activation_function": "gelu_new" if cfg.gelu == "tanh" else "gelu",
        "resid_pdrop": cfg.dropout,
        "embd_pdrop": cfg.dropout,
        "attn_pdrop": cfg.dropout,
        "layer_norm_epsilon": 1e-5,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": None,
        "torch_dtype": "float32",
    }
    if any(p not in ("trainable", "trained-from-draw") for p in cfg.projections()):
        # W_Q or W_K is not trained (frozen, tied or the identity): a reader must freeze it.
        hf[MARKER] = {
            "attention": cfg.attention,
            "frozen_method": cfg.frozen_method,
            "frozen_seed": cfg.frozen_seed,
        }
        # Checked before anything is written: a marker no reader accepts is never saved.
        read_marker(hf[MARKER])
    tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}
    with export_folder(folder, "hf-gpt2", "a Hugging Face GPT-2 model (GPT.to_hf)") as files:
        save_file(tensors, str(files.path("model.safetensors")), {"format": "pt"})
        files.path("config.json").write_text(json.dumps(hf, indent=2) + "\n")
        files.commit()


def export_folder(folder: PathArg, kind: str, what: str) -> Any:
    """The Hugging Face folder ``to_hf`` writes, claimed as ``orthoformer export`` claims its
    ``--out`` (:func:`~orthoformer.outputs.output_folder`): new, empty, or an earlier export of
    the same kind (its ``.orthoformer`` marker); a training checkpoint or any other non-empty
    folder is refused, never written into. ``config.json`` and ``model.safetensors`` are
    replaced as one set."""
    return output_folder(
        "to_hf folder",
        folder,
        what=what,
        tag="hf-export",
        names=("config.json", "model.safetensors"),
        kind=kind,
    )


__all__ = ["export_folder", "from_hf", "gpt2_config", "library_tensors", "to_hf"]
