"""Frozen orthogonal attention in a Hugging Face ``transformers`` model, in place:
:func:`freeze_qk_` turns the query and key projections of a GPT-2 or Llama-family model
(Llama, Mistral, Qwen2, SmolLM: ``q_proj``/``k_proj``) into frozen random orthogonal ones.
Tested with ``transformers`` 5.24.

Layer ``l``'s ``W_Q`` and ``W_K`` are the library's frozen tensors ``2l`` and ``2l + 1``:
per head a ``C x D`` matrix with orthonormal columns drawn from ``(seed, method)``, as
``orthoformer train --attention orthogonal --frozen-seed SEED`` draws them, so a GPT-2 whose
Q/K are frozen here equals the library's GPT with the same seed. Grouped-query attention
keeps its shapes (``K`` has ``num_key_value_heads`` heads). The frozen matrices become
buffers: out of ``parameters()``, the optimizer and autograd. Their biases (GPT-2's fused
``c_attn``, Qwen2's ``q_proj``/``k_proj``) stay trainable and start at zero, as the variant
starts them in the library.

``save_pretrained`` still writes a standard checkpoint (GPT-2's fused ``c_attn`` holding the
frozen values), and ``config.json`` gains a marker ``"orthoformer": {attention, frozen_method,
frozen_seed}``. ``transformers`` alone ignores the marker and loads the frozen matrices as
ordinary trainable weights; :func:`from_pretrained` loads such a folder with them frozen
again (as does ``freeze_qk_(model)`` without arguments on a plainly loaded model), keeping the
stored values.

A model built on the meta device (deferred initialisation, FSDP) can be frozen before it is
materialised: its frozen matrices are drawn from the seed whenever they are allocated
(``to_empty``, ``reset_parameters``) and take the loaded values under
``load_state_dict(assign=True)``, equal bit for bit to a model frozen on the CPU.
``orthogonal-hadamard`` (whose matrices are stored, not drawn again) is refused there.

The frozen projections (:mod:`.hf_frozen`) are ``nn.Linear`` subclasses, so ``peft``'s LoRA
takes them with its default targets (``q_proj``, ``v_proj``; GPT-2's ``c_attn``);
:mod:`.peft_lora` keeps every adapter off the frozen rows (``V`` adapts, Q/K never).

Everything is checked before the model changes: the marker's fields, the seed, and the
config's head counts against the weights' shapes; a mismatch is one
:class:`~orthoformer.validate.InputError` naming the field.
"""

from __future__ import annotations

import json
import os
import pathlib
from os import PathLike
from typing import Any, Optional, Union

import torch
from torch import nn

from .. import validate
from ..config import ATTENTIONS
from ..validate import InputError
from .frozen import draw_seed
from .functional import check_method, frozen_orthogonal_weight
from .hadamard import FrozenHadamardLinear
from .hf_checks import check_gpt2, check_llama
from .hf_frozen import FrozenLinear, FrozenQKVConv1D
from .peft_lora import install as _install_peft_support
from .tied_key import TiedKey

# peft's LoRA on the frozen projections this module installs: masked off the frozen rows.
_install_peft_support()

#: The key of the marker in a model's ``config.json``.
MARKER = "orthoformer"
#: The variants :func:`freeze_qk_` makes (the frozen softmax ones).
FREEZE_VARIANTS = ("orthogonal", "orthogonal-tied", "orthogonal-hadamard")
#: The variants a GPT-2 folder's marker can name: those with an untrained ``W_Q`` or ``W_K``
#: that GPT-2 can compute (softmax kernels; ``GPT.to_hf`` writes no linear attention).
MARKED_VARIANTS = tuple(
    a for a in ATTENTIONS if a not in ("softmax", "linear", "orthogonal-linear", "orthogonal-trained")
)


def read_marker(marker: Any, variants: tuple[str, ...] = MARKED_VARIANTS) -> tuple[str, str, int]:
    """``(attention, frozen_method, frozen_seed)`` of a ``config.orthoformer`` marker, each
    checked (``attention`` one of ``variants``); an :class:`~orthoformer.validate.InputError`
    naming the field otherwise."""
    where = f"config.{MARKER}"
    m = validate.mapping(where, marker)
    unknown = sorted(set(m) - {"attention", "frozen_method", "frozen_seed"})
    if unknown:
        raise InputError(
            f"{where} has an unknown field {unknown[0]!r}: a marker holds attention, frozen_method "
            "and frozen_seed only; remove it"
        )
    attention = validate.choice(f"{where}.attention", validate.field(m, "attention", where), variants)
    method = validate.field(m, "frozen_method", where)
    try:
        check_method(method)
    except InputError as e:
        raise InputError(f"{where}.frozen_method: {e}") from None
    seed = validate.seed(f"{where}.frozen_seed", validate.field(m, "frozen_seed", where))
    return attention, method, seed


def frozen_matrix(
    variant: str, c: int, n_head: int, d_head: int, method: str, seed: int, tensor: int
) -> torch.Tensor:
    """The frozen ``n_head·d_head x c`` matrix of frozen tensor ``tensor`` (float32)."""
    if variant == "orthogonal-hadamard":
        if n_head * d_head != c:
            raise ValueError(
                f"orthogonal-hadamard needs square projections, not {n_head * d_head} x {c}: use orthogonal"
            )
        return FrozenHadamardLinear(c, seed=seed, tensor=tensor).weight
    return frozen_orthogonal_weight(c, n_head, d_head, method=method, seed=seed, tensor=tensor)


def _frozen_like(
    proj: nn.Linear, n_head: int, d_head: int, method: str, seed: int, tensor: int, **where: Any
) -> FrozenLinear:
    """The frozen replacement's module for ``proj`` (its bias if ``proj`` has one), built
    ``where`` says (``device``, ``dtype``); the seed lives in the marker, not ``state_dict``."""
    return FrozenLinear(
        proj.in_features,
        n_head,
        d_head,
        bias=proj.bias is not None,
        method=method,
        seed=seed,
        tensor=tensor,
        seed_in_state_dict=False,
        **where,
    )


def _llama_frozen(
    proj: nn.Linear,
    mat: torch.Tensor,
    n_head: int,
    d_head: int,
    method: str,
    seed: int,
    tensor: int,
    keep_bias: bool,
) -> FrozenLinear:
    """A frozen replacement of a ``q_proj``/``k_proj`` holding ``mat``; its weight persists in
    ``state_dict`` (so ``save_pretrained`` writes it under the same name)."""
    w = proj.weight
    f = _frozen_like(proj, n_head, d_head, method, seed, tensor, device="meta")
    # Stored before allocating, so the allocation does not regenerate values `mat` replaces.
    f._pin()
    f.to_empty(device=w.device)
    f = f.to(w.dtype)
    f.set_weight_(mat)
    if f.bias is not None:
        with torch.no_grad():
            if keep_bias:
                f.bias.copy_(proj.bias)
            else:
                f.bias.zero_()
    return f


def _llama_generated(
    proj: nn.Linear, n_head: int, d_head: int, method: str, seed: int, tensor: int
) -> FrozenLinear:
    """A frozen replacement of a ``q_proj``/``k_proj`` drawing its matrix from ``(seed,
    method, tensor)`` on ``proj``'s device and dtype: drawn again wherever its buffer is
    allocated anew (``to_empty``, ``reset_parameters``, ``load_state_dict(assign=True)``), so a
    meta-built model gets the values a model built on a device has. Its weight persists in
    ``state_dict`` (``save_pretrained`` writes it under the same name); its bias starts at zero."""
    w = proj.weight
    f = _frozen_like(proj, n_head, d_head, method, seed, tensor, device=w.device, dtype=w.dtype)
    f._persist()
    return f


def _same_or_stored(current: torch.Tensor, generated: torch.Tensor, keep: bool) -> torch.Tensor:
    """When restoring from a marker (``keep``), the stored values win; else the generated."""
    return current.detach().clone() if keep else generated


def freeze_qk_(
    model: nn.Module,
    variant: Optional[str] = None,
    *,
    seed: Optional[int] = None,
    method: Optional[str] = None,
) -> nn.Module:
    """Freezes the Q/K projections of a ``transformers`` GPT-2 or Llama-family model in place
    (``variant``: ``orthogonal``, ``orthogonal-tied`` or ``orthogonal-hadamard``; ``seed``
    ``None`` draws one from torch's generator; ``method`` ``qr``, ``svd``, ``householder`` or
    ``cayley``) and records them in ``model.config.orthoformer``. With no arguments on a model
    whose config has that marker (one exported by ``orthoformer export`` or saved after a
    ``freeze_qk_``), the stored Q/K values are frozen as they are. Arguments, the marker and
    the config's head counts are checked against the weights before anything changes: one
    :class:`~orthoformer.validate.InputError` naming the field otherwise. Returns ``model``."""
    cfg = model.config
    marker = getattr(cfg, MARKER, None)
    restore = variant is None and seed is None and method is None and marker is not None
    if restore:
        variant, method, seed = read_marker(marker, FREEZE_VARIANTS)
    variant = variant or "orthogonal"
    if not isinstance(variant, str) or variant not in FREEZE_VARIANTS:
        raise InputError(f"variant: freeze_qk_ makes {', '.join(FREEZE_VARIANTS)}, not {variant!r}")
    method = check_method(method or "qr")
    seed = draw_seed(seed)
    # A meta-built model (deferred initialisation, FSDP) holds no values to keep: its frozen
    # matrices are drawn from the seed whenever they are allocated.
    meta = any(t.is_meta for t in model.parameters())
    stored = restore and not meta
    if meta and variant == "orthogonal-hadamard":
        raise InputError(
            "variant orthogonal-hadamard cannot be frozen on a meta-built model (its matrices are "
            "stored, not drawn again on allocation): freeze after to_empty and initialisation, or "
            "use orthogonal"
        )
    kind = getattr(cfg, "model_type", "")
    if kind == "gpt2":
        attns = check_gpt2(model)
        tied = variant == "orthogonal-tied"
        for layer, attn in enumerate(attns):
            c, h = attn.embed_dim, attn.num_heads

            def draw(
                layer: int = layer, c: int = c, h: int = h
            ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
                wq = frozen_matrix(variant, c, h, c // h, method, seed, 2 * layer)
                return wq, None if tied else frozen_matrix(variant, c, h, c // h, method, seed, 2 * layer + 1)

            w = attn.c_attn.weight
            gq, gk = draw()
            wq = _same_or_stored(w[:, :c].T, gq, stored)
            wk = None if tied else _same_or_stored(w[:, c : 2 * c].T, gk, stored)
            std = float(getattr(cfg, "initializer_range", 0.02))
            attn.c_attn = FrozenQKVConv1D(
                attn.c_attn, wq, wk, keep_bias=stored, draw=None if stored else draw, std=std
            )
    elif hasattr(getattr(model, "model", model), "layers"):
        attns, h, kv, d = check_llama(model, variant)
        # Hadamard matrices and restored values are stored whole; the rest is drawn from the seed.
        keeps_values = stored or variant == "orthogonal-hadamard"

        def replace(proj: nn.Linear, heads: int, tensor: int) -> FrozenLinear:
            if not keeps_values:
                return _llama_generated(proj, heads, d, method, seed, tensor)
            gen = frozen_matrix(variant, proj.in_features, heads, d, method, seed, tensor)
            mat = _same_or_stored(proj.weight, gen, stored)
            return _llama_frozen(proj, mat, heads, d, method, seed, tensor, stored)

        for layer, attn in enumerate(attns):
            q = replace(attn.q_proj, h, 2 * layer)
            k = TiedKey(q) if variant == "orthogonal-tied" else replace(attn.k_proj, kv, 2 * layer + 1)
            attn.q_proj, attn.k_proj = q, k
    else:
        raise InputError(
            f"freeze_qk_ converts GPT-2 and Llama-family models (Llama, Mistral, Qwen2, SmolLM), "
            f"not model_type {kind!r}"
        )
    setattr(cfg, MARKER, {"attention": variant, "frozen_method": method, "frozen_seed": seed})
    return model


def from_pretrained(folder: Union[str, "PathLike[str]"], **kwargs: Any) -> nn.Module:
    """A local Hugging Face folder loaded by ``transformers.AutoModelForCausalLM`` (``kwargs``
    passed on: ``dtype``, ``device_map``, ...) with its Q/K frozen again when ``config.json``
    has the marker that :func:`freeze_qk_`, ``GPT.to_hf`` and ``orthoformer export`` write:
    the stored values become buffers (out of ``parameters()``, the optimizer and autograd)
    exactly as :func:`freeze_qk_` makes them. A folder without the marker loads as it is. The
    marker is checked before any weight is read."""
    from transformers import AutoModelForCausalLM

    path = pathlib.Path(os.fspath(folder))
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise InputError(f"{path} has no config.json: pass a Hugging Face model folder")
    try:
        marker = json.loads(cfg_path.read_text()).get(MARKER)
    except (ValueError, AttributeError) as e:
        raise InputError(f"{cfg_path} is not a JSON object ({e}): pass a Hugging Face model folder") from None
    if marker is not None:
        read_marker(marker, FREEZE_VARIANTS)
    model = AutoModelForCausalLM.from_pretrained(os.fspath(path), **kwargs)
    return model if marker is None else freeze_qk_(model)


__all__ = [
    "FREEZE_VARIANTS",
    "FrozenQKVConv1D",
    "MARKED_VARIANTS",
    "MARKER",
    "TiedKey",
    "freeze_qk_",
    "from_pretrained",
    "frozen_matrix",
    "read_marker",
]
