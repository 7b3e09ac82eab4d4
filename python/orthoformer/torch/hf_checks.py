"""What :func:`~orthoformer.torch.hf.freeze_qk_` checks before it changes a model: the
architecture (separate ``q_proj``/``k_proj`` linear maps; fused QKV and latent attention are
refused by name) and the config's head counts against every layer's weights, each mismatch
one :class:`~orthoformer.validate.InputError` naming the field."""

from __future__ import annotations

from typing import Any, Optional

from torch import nn

from .. import validate
from ..validate import InputError
from .frozen import FrozenOrthogonalLinear
from .hf_frozen import FrozenQKVConv1D
from .tied_key import TiedKey


def _heads(cfg: Any, name: str, default: Optional[int] = None) -> int:
    """``config.name`` as a head count (at least 1), or ``default`` when unset."""
    value = getattr(cfg, name, None)
    if value is None and default is not None:
        return default
    return validate.integer(f"config.{name}", value, lo=1, hint="a head count, as the weights were made with")


def check_gpt2(model: nn.Module) -> list[nn.Module]:
    """GPT-2's attention modules, after checking ``n_head`` against every ``c_attn``."""
    cfg = model.config
    h = _heads(cfg, "n_head")
    blocks = list(getattr(model, "transformer", model).h)
    for layer, block in enumerate(blocks):
        attn = block.attn
        if isinstance(attn.c_attn, FrozenQKVConv1D):
            raise InputError(f"layer {layer}'s Q/K are frozen already: freeze_qk_ a model once")
        c = int(attn.c_attn.weight.shape[0])
        if tuple(attn.c_attn.weight.shape) != (c, 3 * c) or c % h or attn.num_heads != h:
            raise InputError(
                f"config.n_head {h} does not fit layer {layer}'s c_attn of shape "
                f"{tuple(attn.c_attn.weight.shape)} ({attn.num_heads} heads): fix config.n_head"
            )
    return [block.attn for block in blocks]


def _check_structure(model: nn.Module) -> None:
    """Refuses, by architecture, a Llama-shaped model whose attention has no separate
    ``C x D`` query and key projections to freeze: fused ``qkv_proj`` (Phi-3) or multi-head
    latent attention (DeepSeek-V2/V3: keys from a compressed latent)."""
    kind = getattr(model.config, "model_type", "") or type(model).__name__
    for layer, block in enumerate(getattr(model, "model", model).layers):
        attn = getattr(block, "self_attn", None)
        if attn is None:
            raise InputError(
                f"model_type {kind!r}: layer {layer} has no self_attn: freeze_qk_ cannot find Q/K"
            )
        if hasattr(attn, "qkv_proj"):
            raise InputError(
                f"model_type {kind!r} fuses Q, K and V in one qkv_proj: freeze_qk_ needs separate "
                "q_proj and k_proj (Llama, Mistral, Qwen2, SmolLM); this architecture is unsupported"
            )
        if hasattr(attn, "kv_a_proj_with_mqa") or hasattr(attn, "q_a_proj"):
            raise InputError(
                f"model_type {kind!r} uses multi-head latent attention (keys from the compressed "
                "kv_a_proj_with_mqa, no k_proj): it has no C x D key projection to freeze; this "
                "architecture is unsupported"
            )
        for name in ("q_proj", "k_proj"):
            proj = getattr(attn, name, None)
            if not isinstance(proj, (nn.Linear, FrozenOrthogonalLinear, TiedKey)):
                raise InputError(
                    f"model_type {kind!r}: layer {layer}'s attention has no linear {name}: freeze_qk_ "
                    "converts Llama-family attention (q_proj, k_proj, v_proj, o_proj) only"
                )


def check_llama(model: nn.Module, variant: str) -> tuple[list[nn.Module], int, int, int]:
    """The Llama family's attention modules and ``(heads, key heads, head width)``, after
    checking the config's head counts against every ``q_proj``/``k_proj``."""
    _check_structure(model)
    cfg = model.config
    h = _heads(cfg, "num_attention_heads")
    kv = _heads(cfg, "num_key_value_heads", h)
    if kv > h or h % kv:
        raise InputError(
            f"config.num_key_value_heads {kv} must divide config.num_attention_heads {h}: "
            "fix config.num_key_value_heads"
        )
    given_d = getattr(cfg, "head_dim", None) is not None
    hidden = validate.integer("config.hidden_size", getattr(cfg, "hidden_size", None), lo=1)
    if given_d:
        d = validate.integer("config.head_dim", cfg.head_dim, lo=1, hi=hidden)
        width = f"config.head_dim {d}"
    else:
        d = hidden // h
        width = f"head width {d} (hidden_size / num_attention_heads)"
    if variant == "orthogonal-tied" and kv != h:
        raise InputError(
            f"orthogonal-tied needs as many key heads as query heads, not {kv} of {h}: "
            "use orthogonal (config.num_key_value_heads)"
        )
    if variant == "orthogonal-hadamard" and h * d != hidden:
        raise InputError(
            f"orthogonal-hadamard needs square projections, not {h * d} x {hidden}: use orthogonal"
        )
    layers = list(getattr(model, "model", model).layers)
    for layer, block in enumerate(layers):
        attn = block.self_attn
        if isinstance(attn.q_proj, FrozenOrthogonalLinear):
            raise InputError(f"layer {layer}'s Q/K are frozen already: freeze_qk_ a model once")
        for proj, heads, name in (
            (attn.q_proj, h, "num_attention_heads"),
            (attn.k_proj, kv, "num_key_value_heads"),
        ):
            got = tuple(proj.weight.shape)
            if got != (heads * d, hidden):
                fix = f"config.{name}" + (" or config.head_dim" if given_d else "")
                raise InputError(
                    f"config.{name} {heads} x {width} gives {heads * d} x {hidden} projections, but "
                    f"layer {layer}'s are {got[0]} x {got[1]}: fix {fix}"
                )
    if variant == "orthogonal-hadamard" and kv * d != hidden:
        raise InputError(
            f"orthogonal-hadamard needs square projections, not {kv * d} x {hidden} keys: use orthogonal"
        )
    return [block.self_attn for block in layers], h, kv, d


__all__ = ["check_gpt2", "check_llama"]
