"""Causal self-attention of the Orthoformer GPT in PyTorch, every variant of the library's
``model::config::AttentionKind``, built from how each makes its queries and keys:

| variant | ``W_Q`` | ``W_K`` |
|---|---|---|
| ``softmax``, ``linear`` | trainable | trainable |
| ``orthogonal``, ``orthogonal-linear`` | frozen dense | frozen dense |
| ``orthogonal-tied`` | frozen dense | the queries themselves |
| ``identity-q`` | the input itself | trainable |
| ``orthogonal-hadamard`` | frozen SRHT (fast) | frozen SRHT (fast) |

Frozen projections are buffers (never trained, never in an optimizer) holding the library's
values; their biases, when the config has attention biases, train. Softmax attention is
``softmax(QKᵀ/√D + causal mask)V`` with dropout on the probabilities; linear attention is the
causal ``elu(x)+1`` kernel form of ``nn::linear_attention`` (no dropout inside), computed in
chunks: ``O(T·c·D + T·D²)`` for chunk length ``c``.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..config import GPTConfig
from ..model import FrozenTensor
from .hadamard import HadamardProjection

#: Guard added to every linear-attention denominator (``nn::linear_attention::EPS``).
LINEAR_EPS = 1e-6
#: Rows per chunk of the chunked causal linear attention.
LINEAR_CHUNK = 64


class FrozenLinear(nn.Module):
    """``y = x Wᵀ + b`` with ``W`` a frozen buffer (``out x in``) and ``b`` trainable."""

    def __init__(self, weight: torch.Tensor, bias: bool) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.bias = nn.Parameter(torch.zeros(weight.shape[0])) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """``φ(x) = elu(x) + 1``: ``x + 1`` for ``x > 0``, ``exp(x)`` otherwise (the exponential
    of a clamped input, so the unused branch cannot overflow into the gradient)."""
    return torch.where(x > 0, x + 1, torch.exp(torch.clamp(x, max=0)))


def _exclusive_cumsum(x: torch.Tensor) -> torch.Tensor:
    """Prefix sums over dim 2 excluding each element itself."""
    return torch.cat((torch.zeros_like(x[:, :, :1]), torch.cumsum(x, dim=2)[:, :, :-1]), dim=2)


def causal_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int = LINEAR_CHUNK
) -> torch.Tensor:
    """``o_t = φq_tᵀ S_t / (φq_t·z_t + ε)`` with ``S_t = Σ_{s≤t} φk_s v_sᵀ``, ``z_t = Σ_{s≤t}
    φk_s``, for feature-mapped ``q, k`` and ``v`` ``(B, H, T, D)``. Within a chunk the
    masked quadratic form, across chunks the running state (exclusive prefix sums)."""
    b, h, t, d = q.shape
    c = min(chunk, t)
    pad = (-t) % c
    if pad:
        # Zero keys and values add nothing to the state; padded query rows are dropped.
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    n = (t + pad) // c
    qc, kc, vc = (x.reshape(b, h, n, c, d) for x in (q, k, v))
    kv = kc.transpose(-1, -2) @ vc  # (B, H, N, D, D): each chunk's Σ k vᵀ
    ks = kc.sum(3)  # (B, H, N, D): each chunk's Σ k
    state = _exclusive_cumsum(kv)  # the state before each chunk
    zstate = _exclusive_cumsum(ks)
    mask = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    a = (qc @ kc.transpose(-1, -2)).masked_fill(~mask, 0.0)  # (B, H, N, c, c)
    num = a @ vc + qc @ state
    den = a.sum(-1) + (qc * zstate.unsqueeze(3)).sum(-1) + LINEAR_EPS
    o = num / den.unsqueeze(-1)
    return o.reshape(b, h, n * c, d)[:, :, :t]


def _projection(
    kind: str, name: str, cfg: GPTConfig, frozen: dict[str, FrozenTensor], layer: int
) -> Optional[nn.Module]:
    """The module making queries (``name`` ``q``) or keys (``k``): ``None`` for identity
    queries and tied keys, which have no tensor of their own."""
    c = cfg.d_model
    if kind == "trainable":
        return nn.Linear(c, c, bias=cfg.attn_bias)
    if kind in ("identity", "tied-to-q"):
        return None
    ft = frozen[f"h.{layer}.attn.{name}.weight"]
    weight = torch.from_numpy(ft.value.copy())
    if kind == "hadamard" and ft.signs is not None and ft.perm is not None:
        return HadamardProjection(
            weight, torch.from_numpy(ft.signs.copy()), torch.from_numpy(ft.perm), cfg.attn_bias
        )
    # Frozen dense, or Hadamard values imported without their transform: a dense product.
    return FrozenLinear(weight, cfg.attn_bias)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention ``(B, T, C) -> (B, T, C)`` of layer ``layer``."""

    def __init__(self, cfg: GPTConfig, layer: int, frozen: dict[str, FrozenTensor]) -> None:
        super().__init__()
        self.n_head, self.d_head = cfg.n_head, cfg.d_head
        self.linear = cfg.is_linear
        self.dropout = cfg.dropout
        self.q_kind, self.k_kind = cfg.projections()
        # Attribute order is the library's store order (q, k, v, o), so parameters list alike.
        self.q = _projection(self.q_kind, "q", cfg, frozen, layer)
        self.k = _projection(self.k_kind, "k", cfg, frozen, layer)
        self.v = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.attn_bias)
        self.o = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.attn_bias)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_head, self.d_head).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q = x if self.q is None else self.q(x)
        k = q if self.k is None else self.k(x)
        q, k, v = self._heads(q), self._heads(k), self._heads(self.v(x))
        if self.linear:
            y = causal_linear_attention(feature_map(q), feature_map(k), v)
        else:
            p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(
                q, k, v, dropout_p=p, is_causal=True, scale=1.0 / math.sqrt(self.d_head)
            )
        return self.o(y.transpose(1, 2).reshape(b, t, c))
