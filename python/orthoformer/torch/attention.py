"""Orthogonal attention as a drop-in ``nn.Module``: :class:`OrthogonalAttention`, every
variant of the library's ``model::config::AttentionKind``, built from how each makes its
queries and keys:

| variant | ``W_Q`` | ``W_K`` |
|---|---|---|
| ``softmax``, ``linear`` | trainable | trainable |
| ``orthogonal``, ``orthogonal-linear`` | frozen dense | frozen dense |
| ``orthogonal-tied`` | frozen dense | the queries themselves |
| ``identity-q`` | the input itself | trainable |
| ``orthogonal-hadamard`` | frozen SRHT (fast) | frozen SRHT (fast) |
| ``orthogonal-trained`` | trainable, from the frozen draw | trainable, from the frozen draw |

Frozen projections (:class:`~orthoformer.torch.frozen.FrozenOrthogonalLinear`,
:class:`~orthoformer.torch.hadamard.FrozenHadamardLinear`) hold non-persistent buffers
regenerated from the seed, never parameters; their biases train. Softmax attention is
``F.scaled_dot_product_attention`` (``1/√D``, dropout on the probabilities); linear attention
is the causal ``elu(x)+1`` kernel form in chunks (no dropout inside). Optionally, as the
library's GPT has them: rotary positions on the queries and keys (``rope=True``; before the
feature map for linear attention) and a learned per-head temperature on the scores
(``learned_temperature=True``, softmax kernels only). The library's GPT is built from this
module (:meth:`OrthogonalAttention.from_config`).

Beyond the library's GPT: grouped-query attention (``num_kv_heads``: keys and values have
fewer heads, each shared by ``n_head / num_kv_heads`` query heads, as ``transformers``'
``repeat_kv`` shares them; a frozen ``W_K`` then has ``num_kv_heads`` heads, drawn as
:func:`~orthoformer.torch.freeze_qk_` draws a Llama's), and masks beyond causal in
:meth:`OrthogonalAttention.forward` (``attn_mask``, ``doc_ids``: :mod:`.masking`). Trainable
projections (and, separately, frozen dense ones) are computed as one product over their
concatenated weights; the modules and their parameter names stay ``q``, ``k``, ``v``.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .. import _native
from ..config import ATTENTIONS, GPTConfig
from ..validate import InputError, integer
from . import rope as _rope
from .frozen import FrozenOrthogonalLinear, check_frozen_state, draw_seed, note_unplaced_seed
from .functional import Device, causal_linear_attention, feature_map, linear_attention  # noqa: F401
from .drawn import DrawnInitLinear
from .hadamard import FrozenHadamardLinear
from .masking import (
    check_attention_mask,
    check_attn_mask,
    check_doc_ids,
    keep_mask,
    masked_linear_attention,
    softmax_mask,
)

LINEAR_VARIANTS = ("linear", "orthogonal-linear")
#: The masks of one forward call by keyword (``attn_mask``, ``doc_ids``, ``attention_mask``).
Masks = dict[str, Optional[torch.Tensor]]
#: Whether ``scaled_dot_product_attention`` shares key/value heads itself (torch 2.5+).
_SDPA_GQA = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


def _hooked(m: nn.Module) -> bool:
    """Whether ``m`` has forward hooks (which a fused product would bypass)."""
    return bool(m._forward_hooks or m._forward_pre_hooks)


class KVCache:
    """The keys and values ``(B, KV, T, D)`` one softmax attention layer has seen so far, for
    incremental decoding (:meth:`orthoformer.torch.GPT.generate`)."""

    def __init__(self) -> None:
        self.k: Optional[torch.Tensor] = None
        self.v: Optional[torch.Tensor] = None

    @property
    def length(self) -> int:
        """Positions cached."""
        return 0 if self.k is None else int(self.k.shape[2])

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Appends new positions; returns all keys and values."""
        self.k = k if self.k is None else torch.cat((self.k, k), dim=2)
        self.v = v if self.v is None else torch.cat((self.v, v), dim=2)
        return self.k, self.v


class OrthogonalAttention(nn.Module):
    """Multi-head self-attention ``(B, T, C) -> (B, T, C)`` with queries and keys as
    ``variant`` says (one of the eight above; default frozen dense orthogonal), ``n_head``
    heads of width ``C / n_head``.

    Frozen matrices are drawn by ``method`` (``qr``, ``svd``, ``householder``, ``cayley``)
    from ``seed`` (``None``: one drawn from torch's generator) as layer ``layer`` of a library
    GPT whose ``frozen_seed`` is ``seed``. ``bias`` gives every projection a bias (trainable,
    also for frozen ones), and ``out_bias`` (default ``bias``) decides it for the output
    projection apart (Qwen2: biases on Q, K, V only); ``dropout`` applies to the softmax
    probabilities while training; ``causal=False`` attends to the whole sequence;
    ``seed_in_state_dict=False`` leaves the seed out of ``state_dict`` (where something else
    records it). ``rope`` rotates every
    head's queries and keys by their position (base ``rope_theta``; a cached call continues
    from the cache's length), so frozen scores see relative position; ``learned_temperature``
    adds ``temperature``, one trained scalar per head (starting at 1) multiplying its scores,
    with frozen ``W_Q, W_K`` the only trained part of the score path. Trainable projections are
    ``nn.Linear`` with torch's default initialisation; ``device``/``dtype`` as for any torch
    module (on ``meta`` nothing is generated until :meth:`reset_frozen`). ``num_kv_heads``
    (default ``n_head``, a divisor of it) gives keys and values that many heads, each shared
    by ``n_head / num_kv_heads`` query heads (grouped-query attention; ``1``: multi-query)."""

    def __init__(
        self,
        d_model: int,
        n_head: int,
        *,
        variant: str = "orthogonal",
        method: str = "qr",
        seed: Optional[int] = None,
        bias: bool = False,
        out_bias: Optional[bool] = None,
        dropout: float = 0.0,
        causal: bool = True,
        layer: Optional[int] = None,
        seed_in_state_dict: bool = True,
        rope: bool = False,
        rope_theta: float = _rope.THETA,
        learned_temperature: bool = False,
        num_kv_heads: Optional[int] = None,
        device: Device = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        if variant not in ATTENTIONS:
            raise ValueError(f"unknown attention variant {variant!r}: use one of {', '.join(ATTENTIONS)}")
        if n_head < 1 or d_model % n_head:
            raise ValueError(f"d_model {d_model} is not divisible by n_head {n_head}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model, self.n_head, self.d_head = d_model, n_head, d_model // n_head
        self.n_kv_head = self._kv_heads(variant, n_head, num_kv_heads)
        # Width of K and V: num_kv_heads heads of the queries' width.
        self.kv_dim = self.n_kv_head * self.d_head
        self.variant, self.causal, self.dropout = variant, causal, dropout
        self.linear = variant in LINEAR_VARIANTS
        if rope and self.d_head % 2:
            raise ValueError(
                f"rotary positions turn pairs of dimensions: the head width {self.d_head} must be even"
            )
        if not rope_theta > 0:
            raise ValueError(f"rope_theta must be positive, got {rope_theta}")
        if learned_temperature and self.linear:
            raise ValueError(
                f"a learned temperature scales softmax scores, and {variant} is linear attention: "
                "use a softmax variant or learned_temperature=False"
            )
        self.rope, self.rope_theta = rope, float(rope_theta)
        self.q_kind, self.k_kind = _native.attention_projections(variant)
        kinds = (self.q_kind, self.k_kind)
        frozen = any(k in kinds for k in ("frozen-dense", "hadamard", "trained-from-draw"))
        # Checked even where unused (softmax: a bad seed never passes silently); drawn only
        # when something is drawn from it, so softmax modules leave torch's generator alone.
        self.seed = draw_seed(seed) if frozen or seed is not None else None
        # Layer l draws from (seed, l); no layer given is layer 0.
        self.layer = 0 if layer is None else integer("layer", layer, lo=0, hi=2**62)
        self.method = method
        self._seed_in_state_dict = seed_in_state_dict
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        # Attribute order is the library's store order (q, k, v, o), so parameters list alike.
        self.q = self._projection(self.q_kind, 2 * self.layer, bias, kw)
        self.k = self._projection(self.k_kind, 2 * self.layer + 1, bias, kw, self.n_kv_head)
        if frozen and seed is not None and layer is None:
            # A second live module drawing layer 0 from this seed would hold the same matrices.
            note_unplaced_seed(
                self, self.seed, "hadamard" if "hadamard" in (self.q_kind, self.k_kind) else method
            )
        # Seeds and stored matrices in a state_dict are checked before anything loads.
        self.register_load_state_dict_pre_hook(check_frozen_state)
        self.v = nn.Linear(d_model, self.kv_dim, bias=bias, **kw)
        self.o = nn.Linear(d_model, d_model, bias=bias if out_bias is None else out_bias, **kw)
        # After `o`: the library stores a layer's temperature after its projections.
        self.temperature = nn.Parameter(torch.ones(n_head, **kw)) if learned_temperature else None

    def reset_parameters(self) -> None:
        """Sets the temperature (if any) back to 1, as for a module built on ``meta`` and
        allocated with ``to_empty`` (the projections reset themselves)."""
        if self.temperature is not None:
            with torch.no_grad():
                self.temperature.fill_(1.0)

    @staticmethod
    def _kv_heads(variant: str, n_head: int, num_kv_heads: Optional[int]) -> int:
        """``num_kv_heads`` checked (``None``: one per query head)."""
        if num_kv_heads is None:
            return n_head
        kv = integer("num_kv_heads", num_kv_heads, lo=1, hi=n_head)
        if n_head % kv:
            raise InputError(f"num_kv_heads {kv} does not divide n_head {n_head}: pick a divisor of n_head")
        if kv != n_head and variant == "orthogonal-tied":
            raise InputError(
                f"orthogonal-tied keys are the queries, so num_kv_heads must be n_head {n_head}, not {kv}"
            )
        if kv != n_head and variant == "orthogonal-hadamard":
            raise InputError(f"orthogonal-hadamard is square, not {kv} of {n_head} key heads: use orthogonal")
        return kv

    def _projection(
        self, kind: str, tensor: int, bias: bool, kw: dict[str, Any], heads: Optional[int] = None
    ) -> Optional[nn.Module]:
        """The module making queries or keys (frozen tensor number ``tensor``, ``heads`` heads,
        default ``n_head``): ``None`` for identity queries and tied keys, which have no tensor
        of their own."""
        c = self.d_model
        heads = self.n_head if heads is None else heads
        if kind == "trainable":
            return nn.Linear(c, heads * self.d_head, bias=bias, **kw)
        if kind == "trained-from-draw":
            assert self.seed is not None  # drawn in __init__ for this kind
            return DrawnInitLinear(
                c, heads, self.d_head, seed=self.seed, bias=bias, method=self.method, tensor=tensor, **kw
            )
        if kind in ("identity", "tied-to-q"):
            return None
        if kind == "hadamard":
            return FrozenHadamardLinear(
                c, bias=bias, seed=self.seed, tensor=tensor, seed_in_state_dict=self._seed_in_state_dict, **kw
            )
        return FrozenOrthogonalLinear(
            c,
            heads,
            self.d_head,
            bias=bias,
            method=self.method,
            seed=self.seed,
            tensor=tensor,
            seed_in_state_dict=self._seed_in_state_dict,
            **kw,
        )

    @classmethod
    def from_config(
        cls, cfg: GPTConfig, layer: int, *, device: Device = None, dtype: Optional[torch.dtype] = None
    ) -> OrthogonalAttention:
        """Layer ``layer``'s attention of the library's GPT ``cfg`` (its variant, biases,
        dropout, frozen method and seed; the config records the seed, so ``state_dict``
        holds trained tensors only)."""
        return cls(
            cfg.d_model,
            cfg.n_head,
            variant=cfg.attention,
            method=cfg.frozen_method,
            seed=cfg.frozen_seed,
            bias=cfg.attn_bias,
            dropout=cfg.dropout,
            layer=layer,
            seed_in_state_dict=False,
            rope=cfg.position == "rope",
            learned_temperature=cfg.temperature == "learned",
            device=device,
            dtype=dtype,
        )

    def frozen_modules(self) -> dict[str, nn.Module]:
        """The frozen projections by attribute name (``q``, ``k``)."""
        return {n: m for n, m in (("q", self.q), ("k", self.k)) if hasattr(m, "reset_frozen")}

    def reset_frozen(self) -> None:
        """Regenerates every frozen matrix from the seed (after ``to_empty``)."""
        for m in self.frozen_modules().values():
            m.reset_frozen()  # type: ignore[operator]

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, H·D) -> (B, H, T, D)``, ``H`` query or key/value heads."""
        b, t, _ = x.shape
        return x.view(b, t, -1, self.d_head).transpose(1, 2)

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries ``(B, T, H·D)``, keys and values ``(B, T, KV·D)`` of ``x`` ``(B, T, C)``.
        Plain trainable ``nn.Linear`` projections run as one product over their concatenated
        weights (one GEMM, and one for the weight gradients), frozen dense ones as another
        (no gradient to compute for them); anything else (Hadamard, hooked or replaced
        modules) runs as itself."""
        mods = {"q": self.q, "k": self.k, "v": self.v}
        out: dict[str, torch.Tensor] = {}
        for kinds in ((nn.Linear, DrawnInitLinear), (FrozenOrthogonalLinear,)):
            names = [n for n, m in mods.items() if type(m) in kinds and not _hooked(m)]
            group = [mods[n] for n in names]
            biases = [m.bias for m in group]  # type: ignore[union-attr]
            fusable = (
                len(group) > 1
                and len({m.weight.dtype for m in group}) == 1  # type: ignore[union-attr]
                and (all(b is None for b in biases) or all(b is not None for b in biases))
            )
            if not fusable:
                continue
            w = torch.cat([m.weight for m in group])  # type: ignore[union-attr]
            bias = None if biases[0] is None else torch.cat(biases)  # type: ignore[arg-type]
            sizes = [m.weight.shape[0] for m in group]  # type: ignore[union-attr]
            out.update(zip(names, F.linear(x, w, bias).split(sizes, dim=-1)))
        q = x if self.q is None else out["q"] if "q" in out else self.q(x)
        k = q if self.k is None else out["k"] if "k" in out else self.k(x)
        v = out["v"] if "v" in out else self.v(x)
        return q, k, v

    def forward(
        self,
        x: torch.Tensor,
        cache: Optional[KVCache] = None,
        attn_mask: Optional[torch.Tensor] = None,
        doc_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """Attention of ``x`` ``(B, T, C)``; with ``cache`` (softmax kernels only), ``x`` holds
        the positions after the cached ones, whose keys and values are reused and extended.

        ``attn_mask`` 4-d, broadcastable to ``(B, H, T, S)`` (``S`` keys: ``T``, plus the cached
        ones): boolean (``True`` attends) or float (added to the scores; softmax kernels only).
        ``attention_mask`` ``(B, S)``, boolean or 0/1 (Hugging Face's padding mask: 1 for a
        token): no query attends to a padding key. ``doc_ids`` ``(B, T)`` integers: a token
        attends only to tokens of its own document (packed sequences; not with a filled
        cache). All combine with the causal mask; linear kernels then run in their masked
        quadratic form."""
        b, t, _ = x.shape
        q, k, v = (self._heads(y) for y in self._project(x))
        past = 0 if cache is None else cache.length
        if attn_mask is not None:
            check_attn_mask(attn_mask, (b, self.n_head, t, past + t))
        if attention_mask is not None:
            attention_mask = check_attention_mask(attention_mask, b, past + t)
        if doc_ids is not None:
            check_doc_ids(doc_ids, b, t)
            if past:
                raise InputError("doc_ids mask one window of packed documents: run it without a filled cache")
        if self.rope:
            theta = self.rope_theta
            cos, sin = _rope.tables(past, t, self.d_head, theta=theta, device=x.device, dtype=q.dtype)
            q, k = _rope.rotate(q, cos, sin), _rope.rotate(k, cos, sin)
        if self.temperature is not None:
            q = q * self.temperature.to(q.dtype).view(1, -1, 1, 1)
        masks = {"attn_mask": attn_mask, "doc_ids": doc_ids, "attention_mask": attention_mask}
        y = (self._linear if self.linear else self._softmax)(q, k, v, cache, masks)
        return self.o(y.transpose(1, 2).reshape(b, t, self.n_head * self.d_head))

    def _linear(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: Optional[KVCache], masks: Masks
    ) -> torch.Tensor:
        """Linear attention of ``q`` ``(B, H, T, D)`` over ``k, v`` ``(B, KV, T, D)``."""
        if cache is not None:
            raise ValueError("linear attention keeps no key/value cache: run it over the whole window")
        attn_mask = masks["attn_mask"]
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            raise InputError(
                f"{self.variant} attention has no scores to add a float attn_mask to: pass a boolean one"
            )
        k, v = self._repeat_kv(k, v)
        if all(m is None for m in masks.values()):
            return linear_attention(q, k, v, causal=self.causal)
        t = q.shape[2]
        keep = keep_mask(t, t, causal=self.causal, device=q.device, **masks)
        return masked_linear_attention(q, k, v, keep)  # type: ignore[arg-type]

    def _softmax(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: Optional[KVCache], masks: Masks
    ) -> torch.Tensor:
        """Scaled dot-product attention of ``q`` ``(B, H, T, D)`` over ``k, v`` ``(B, KV, T,
        D)`` (appended to ``cache`` first)."""
        p = self.dropout if self.training else 0.0
        t = q.shape[2]
        if cache is not None:
            k, v = cache.extend(k, v)
        s = k.shape[2]
        mask, causal = None, self.causal
        if any(m is not None for m in masks.values()):
            keep = keep_mask(t, s, causal=self.causal, device=q.device, **masks)
            mask, causal = softmax_mask(keep, masks["attn_mask"], q.dtype), False
        elif s != t and self.causal:
            # Query i sits at position s - t + i (after the cache): it sees keys 0..s - t + i;
            # `is_causal` would align the mask to the top left instead.
            causal = False
            if t > 1:
                mask = keep_mask(t, s, causal=True, doc_ids=None, attn_mask=None, device=q.device)
        gqa: dict[str, Any] = {}
        if self.n_kv_head != self.n_head:
            if _SDPA_GQA:
                gqa["enable_gqa"] = True
            else:
                k, v = self._repeat_kv(k, v)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=1.0 / math.sqrt(self.d_head), **gqa
        )

    def _repeat_kv(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values ``(B, KV, S, D)`` repeated to ``(B, H, S, D)``: query head ``h``
        reads key/value head ``h // (H / KV)``, as transformers' ``repeat_kv``."""
        groups = self.n_head // self.n_kv_head
        if groups == 1:
            return k, v
        return k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)

    def extra_repr(self) -> str:
        parts = [
            f"variant={self.variant}",
            f"n_head={self.n_head}",
            f"causal={self.causal}",
            f"dropout={self.dropout}",
        ]
        if self.n_kv_head != self.n_head:
            parts.append(f"num_kv_heads={self.n_kv_head}")
        if self.rope:
            parts.append("rope=True")
        if self.temperature is not None:
            parts.append("learned_temperature=True")
        return ", ".join(parts)


__all__ = ["KVCache", "LINEAR_VARIANTS", "OrthogonalAttention"]
