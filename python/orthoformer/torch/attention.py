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

Frozen projections (:class:`~orthoformer.torch.frozen.FrozenOrthogonalLinear`,
:class:`~orthoformer.torch.hadamard.FrozenHadamardLinear`) hold non-persistent buffers
regenerated from the seed, never parameters; their biases train. Softmax attention is
``F.scaled_dot_product_attention`` (``1/√D``, dropout on the probabilities); linear attention
is the causal ``elu(x)+1`` kernel form in chunks (no dropout inside). Optionally, as the
library's GPT has them: rotary positions on the queries and keys (``rope=True``; before the
feature map for linear attention) and a learned per-head temperature on the scores
(``learned_temperature=True``, softmax kernels only). The library's GPT is built from this
module (:meth:`OrthogonalAttention.from_config`).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .. import _native
from ..config import ATTENTIONS, GPTConfig
from . import rope as _rope
from .frozen import FrozenOrthogonalLinear, draw_seed
from .functional import Device, causal_linear_attention, feature_map, linear_attention  # noqa: F401
from .hadamard import FrozenHadamardLinear

LINEAR_VARIANTS = ("linear", "orthogonal-linear")


class KVCache:
    """The keys and values ``(B, H, T, D)`` one softmax attention layer has seen so far, for
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
    ``variant`` says (one of the seven above; default frozen dense orthogonal), ``n_head``
    heads of width ``C / n_head``.

    Frozen matrices are drawn by ``method`` (``qr``, ``svd``, ``householder``, ``cayley``)
    from ``seed`` (``None``: one drawn from torch's generator) as layer ``layer`` of a library
    GPT whose ``frozen_seed`` is ``seed``. ``bias`` gives every projection a bias (trainable,
    also for frozen ones); ``dropout`` applies to the softmax probabilities while training;
    ``causal=False`` attends to the whole sequence; ``seed_in_state_dict=False`` leaves the
    seed out of ``state_dict`` (where something else records it). ``rope`` rotates every
    head's queries and keys by their position (base ``rope_theta``; a cached call continues
    from the cache's length), so frozen scores see relative position; ``learned_temperature``
    adds ``temperature``, one trained scalar per head (starting at 1) multiplying its scores,
    with frozen ``W_Q, W_K`` the only trained part of the score path. Trainable projections are
    ``nn.Linear`` with torch's default initialisation; ``device``/``dtype`` as for any torch
    module (on ``meta`` nothing is generated until :meth:`reset_frozen`)."""

    def __init__(
        self,
        d_model: int,
        n_head: int,
        *,
        variant: str = "orthogonal",
        method: str = "qr",
        seed: Optional[int] = None,
        bias: bool = False,
        dropout: float = 0.0,
        causal: bool = True,
        layer: int = 0,
        seed_in_state_dict: bool = True,
        rope: bool = False,
        rope_theta: float = _rope.THETA,
        learned_temperature: bool = False,
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
        frozen = "frozen-dense" in (self.q_kind, self.k_kind) or "hadamard" in (self.q_kind, self.k_kind)
        # Drawn only when something is frozen, so softmax modules leave torch's generator alone.
        self.seed = draw_seed(seed) if frozen else seed
        self.method = method
        self._seed_in_state_dict = seed_in_state_dict
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        # Attribute order is the library's store order (q, k, v, o), so parameters list alike.
        self.q = self._projection(self.q_kind, 2 * layer, bias, kw)
        self.k = self._projection(self.k_kind, 2 * layer + 1, bias, kw)
        self.v = nn.Linear(d_model, d_model, bias=bias, **kw)
        self.o = nn.Linear(d_model, d_model, bias=bias, **kw)
        # After `o`: the library stores a layer's temperature after its projections.
        self.temperature = nn.Parameter(torch.ones(n_head, **kw)) if learned_temperature else None

    def reset_parameters(self) -> None:
        """Sets the temperature (if any) back to 1, as for a module built on ``meta`` and
        allocated with ``to_empty`` (the projections reset themselves)."""
        if self.temperature is not None:
            with torch.no_grad():
                self.temperature.fill_(1.0)

    def _projection(self, kind: str, tensor: int, bias: bool, kw: dict[str, Any]) -> Optional[nn.Module]:
        """The module making queries or keys (frozen tensor number ``tensor``): ``None`` for
        identity queries and tied keys, which have no tensor of their own."""
        c = self.d_model
        if kind == "trainable":
            return nn.Linear(c, c, bias=bias, **kw)
        if kind in ("identity", "tied-to-q"):
            return None
        if kind == "hadamard":
            return FrozenHadamardLinear(
                c, bias=bias, seed=self.seed, tensor=tensor, seed_in_state_dict=self._seed_in_state_dict, **kw
            )
        return FrozenOrthogonalLinear(
            c,
            self.n_head,
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
        b, t, _ = x.shape
        return x.view(b, t, self.n_head, self.d_head).transpose(1, 2)

    def forward(self, x: torch.Tensor, cache: Optional[KVCache] = None) -> torch.Tensor:
        """Attention of ``x`` ``(B, T, C)``; with ``cache`` (softmax kernels only), ``x`` holds
        the positions after the cached ones, whose keys and values are reused and extended."""
        b, t, c = x.shape
        q = x if self.q is None else self.q(x)
        k = q if self.k is None else self.k(x)
        q, k, v = self._heads(q), self._heads(k), self._heads(self.v(x))
        if self.rope:
            start = 0 if cache is None else cache.length
            cos, sin = _rope.tables(
                start, t, self.d_head, theta=self.rope_theta, device=x.device, dtype=q.dtype
            )
            q, k = _rope.rotate(q, cos, sin), _rope.rotate(k, cos, sin)
        if self.temperature is not None:
            q = q * self.temperature.to(q.dtype).view(1, -1, 1, 1)
        if self.linear:
            if cache is not None:
                raise ValueError("linear attention keeps no key/value cache: run it over the whole window")
            y = linear_attention(q, k, v, causal=self.causal)
        else:
            p = self.dropout if self.training else 0.0
            mask, causal = None, self.causal
            if cache is not None:
                past = cache.length
                k, v = cache.extend(k, v)
                if past and self.causal:
                    # Query i sits at position past + i: it sees keys 0..past + i.
                    causal = False
                    if t > 1:
                        pos = torch.arange(past + t, device=x.device)
                        mask = pos[None, :] <= (past + torch.arange(t, device=x.device))[:, None]
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=1.0 / math.sqrt(self.d_head)
            )
        return self.o(y.transpose(1, 2).reshape(b, t, c))

    def extra_repr(self) -> str:
        parts = [
            f"variant={self.variant}",
            f"n_head={self.n_head}",
            f"causal={self.causal}",
            f"dropout={self.dropout}",
        ]
        if self.rope:
            parts.append("rope=True")
        if self.temperature is not None:
            parts.append("learned_temperature=True")
        return ", ".join(parts)


__all__ = ["KVCache", "LINEAR_VARIANTS", "OrthogonalAttention"]
