"""Orthogonal attention as functions: the frozen projection matrices the library draws,
the linear-attention kernel in its causal chunked and non-causal forms, and one attention
call over given projection weights (what :class:`orthoformer.torch.nn.OrthogonalAttention`
runs).

Frozen matrices are numbered as the library numbers them: tensor ``2l`` is layer ``l``'s
``W_Q``, ``2l + 1`` its ``W_K``; head ``h`` of tensor ``i`` is drawn from
``head_seed(seed, i, h)``. So ``frozen_orthogonal_weight(C, H, seed=s, tensor=2l)`` is, to the
bit, ``h.{l}.attn.q.weight`` of a library GPT whose ``frozen_seed`` is ``s``.
"""

from __future__ import annotations

import math
from typing import Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

from .. import _native, validate
from .. import init as _init

#: Guard added to every linear-attention denominator (``nn::linear_attention::EPS``).
LINEAR_EPS = 1e-6
#: Rows per chunk of the chunked causal linear attention.
LINEAR_CHUNK = 64

Device = Union[str, torch.device, None]


def head_seed(seed: int, tensor: int, head: int) -> int:
    """The seed of head ``head`` of frozen tensor ``tensor`` under base seed ``seed`` (the
    library's ``model::gpt::store::head_seed``); each an integer from 0 to 2**64 - 1."""
    s = validate.seed("seed", seed)
    t = validate.integer("tensor", tensor, lo=0, hi=validate.SEED_MAX)
    return int(_native.frozen_head_seed(s, t, validate.integer("head", head, lo=0, hi=validate.SEED_MAX)))


#: How frozen ``W_Q, W_K`` may be drawn: the library's orthogonal generators, or ``gaussian``
#: (i.i.d. ``N(0, 1/in_features)`` entries, NOT orthogonal: the equal-scale control).
FROZEN_METHODS = (*_init.ORTHO_METHODS, "gaussian")


def check_method(method: str) -> str:
    """``method`` when it is one of the library's frozen draws (:data:`FROZEN_METHODS`:
    ``qr``, ``svd``, ``householder``, ``cayley`` or ``gaussian``), else an
    :class:`~orthoformer.validate.InputError`."""
    if not isinstance(method, str) or method not in FROZEN_METHODS:
        raise validate.InputError(
            f"unknown frozen method {method!r}: use one of {', '.join(FROZEN_METHODS)} "
            "(gaussian is not orthogonal: the equal-scale control)"
        )
    return method


def frozen_orthogonal_weight(
    in_features: int,
    n_head: int,
    d_head: Optional[int] = None,
    *,
    method: str = "qr",
    seed: int = 0,
    tensor: int = 0,
    device: Device = None,
    dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """The frozen projection ``W`` (``n_head·d_head x in_features``, ``out x in``): rows
    ``h·D .. (h+1)·D`` are head ``h``'s ``in_features x D`` random orthogonal matrix
    (orthonormal columns, by ``method``: ``qr``, ``svd``, ``householder`` or ``cayley``; or,
    for ``gaussian``, i.i.d. ``N(0, 1/in_features)`` entries, not orthogonal) transposed, drawn
    from ``head_seed(seed, tensor, h)`` by the library's ``FrozenDraw::block``. ``d_head`` defaults to
    ``in_features / n_head``. Computed in float64, rounded once (to float32, as the library
    stores it, then to ``dtype``)."""
    in_features = validate.integer("in_features", in_features, lo=1)
    n_head = validate.integer("n_head", n_head, lo=1)
    if d_head is None:
        if in_features % n_head:
            raise validate.InputError(
                f"in_features {in_features} is not divisible by n_head {n_head}: pass d_head"
            )
        d_head = in_features // n_head
    hint = "a head's block needs d_head <= in_features"
    d_head = validate.integer("d_head", d_head, lo=1, hi=in_features, hint=hint)
    method = check_method(method)
    # Checked before any drawing, so a bad seed fails here, not inside the native module.
    seed = validate.seed("seed", seed)
    tensor = validate.integer("tensor", tensor, lo=0, hi=validate.SEED_MAX)
    w = np.empty((n_head * d_head, in_features), dtype=np.float32)
    for h in range(n_head):
        raw = _native.init_frozen_block(method, in_features, d_head, head_seed(seed, tensor, h))
        m = np.frombuffer(bytes(raw), dtype="<f8").reshape(in_features, d_head)
        w[h * d_head : (h + 1) * d_head] = m.T.astype(np.float32)
    return torch.from_numpy(w).to(device=device, dtype=dtype or torch.float32)


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
    masked quadratic form, across chunks the running state (exclusive prefix sums):
    ``O(T·c·D + T·D²)`` for chunk length ``c``."""
    b, h, t, d = q.shape
    c = min(chunk, t)
    pad = (-t) % c
    if pad:
        # Zero keys and values add nothing to the state; padded query rows are dropped.
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    n = (t + pad) // c
    dv = v.shape[-1]
    qc, kc = (x.reshape(b, h, n, c, d) for x in (q, k))
    vc = v.reshape(b, h, n, c, dv)
    kv = kc.transpose(-1, -2) @ vc  # (B, H, N, D, Dv): each chunk's Σ k vᵀ
    ks = kc.sum(3)  # (B, H, N, D): each chunk's Σ k
    state = _exclusive_cumsum(kv)  # the state before each chunk
    zstate = _exclusive_cumsum(ks)
    mask = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    a = (qc @ kc.transpose(-1, -2)).masked_fill(~mask, 0.0)  # (B, H, N, c, c)
    num = a @ vc + qc @ state
    den = a.sum(-1) + (qc * zstate.unsqueeze(3)).sum(-1) + LINEAR_EPS
    o = num / den.unsqueeze(-1)
    return o.reshape(b, h, n * c, dv)[:, :, :t]


def linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True, chunk: int = LINEAR_CHUNK
) -> torch.Tensor:
    """Linear (kernel) attention of ``q, k, v`` ``(B, H, T, D)`` with the ``elu + 1`` feature
    map: causal (chunked, :func:`causal_linear_attention`) or over the whole sequence
    (``φQ (φKᵀV) / (φQ Σφk + ε)``)."""
    fq, fk = feature_map(q), feature_map(k)
    if causal:
        return causal_linear_attention(fq, fk, v, chunk)
    num = fq @ (fk.transpose(-1, -2) @ v)
    den = (fq * fk.sum(2, keepdim=True)).sum(-1, keepdim=True) + LINEAR_EPS
    return num / den


def attention(
    x: torch.Tensor,
    q_weight: Optional[torch.Tensor],
    k_weight: Optional[torch.Tensor],
    v_weight: torch.Tensor,
    o_weight: torch.Tensor,
    n_head: int,
    *,
    kernel: str = "softmax",
    tied_keys: bool = False,
    biases: Optional[tuple[Optional[torch.Tensor], ...]] = None,
    causal: bool = True,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Multi-head attention of ``x`` ``(B, T, C)`` over given projection weights (``out x
    in``): ``q_weight`` ``None`` means the input itself is the queries (``identity-q``),
    ``tied_keys`` that the keys are the queries (``orthogonal-tied``); ``biases`` are ``(b_q,
    b_k, b_v, b_o)`` (any ``None``). ``kernel`` is ``softmax`` (scaled dot product, ``1/√D``,
    dropout ``dropout_p`` on the probabilities) or ``linear``."""
    bq, bk, bv, bo = biases if biases is not None else (None, None, None, None)
    b, t, c = x.shape
    q = x if q_weight is None else F.linear(x, q_weight, bq)
    k = q if tied_keys else F.linear(x, k_weight, bk)  # type: ignore[arg-type]
    v = F.linear(x, v_weight, bv)
    d = c // n_head
    q, k, v = (y.view(b, t, n_head, -1).transpose(1, 2) for y in (q, k, v))
    if kernel == "linear":
        y = linear_attention(q, k, v, causal=causal)
    elif kernel == "softmax":
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=causal, scale=1.0 / math.sqrt(d)
        )
    else:
        raise ValueError(f"unknown attention kernel {kernel!r}: use softmax or linear")
    return F.linear(y.transpose(1, 2).reshape(b, t, -1), o_weight, bo)


__all__ = [
    "LINEAR_CHUNK",
    "LINEAR_EPS",
    "attention",
    "causal_linear_attention",
    "check_method",
    "feature_map",
    "frozen_orthogonal_weight",
    "head_seed",
    "linear_attention",
]
