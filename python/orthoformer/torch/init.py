"""The library's initialisers filling PyTorch tensors in place, as ``torch.nn.init`` does:
same names, arguments and fan rules (``fan_in = size(1)·rf``, ``fan_out = size(0)·rf``), plus
``seed`` (the library's generator, so the same seed gives the same bits as ``orthoformer
init``) and the orthogonal ``method``. Values are computed in float64 and rounded once to the
tensor's dtype; bad inputs raise ``ValueError``; a zero-element tensor is left alone with a
warning, as PyTorch does.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from .. import init as _init

calculate_gain = _init.calculate_gain


def _fill(tensor: torch.Tensor, method: str, seed: int = 0, **params: Any) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return tensor
    shape = tuple(tensor.shape) if tensor.dim() > 0 else (1,)
    values = _init.generate(method, shape, seed, np.float64, **params)
    with torch.no_grad():
        src = torch.from_numpy(values).reshape(tensor.shape)
        tensor.copy_(src.to(dtype=tensor.dtype, device=tensor.device))
    return tensor


def uniform_(tensor: torch.Tensor, a: float = 0.0, b: float = 1.0, seed: int = 0) -> torch.Tensor:
    """``U(a, b)``."""
    return _fill(tensor, "uniform", seed, lo=a, hi=b)


def normal_(tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0, seed: int = 0) -> torch.Tensor:
    """``N(mean, std²)``."""
    return _fill(tensor, "normal", seed, mean=mean, std=std)


def trunc_normal_(
    tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, seed: int = 0
) -> torch.Tensor:
    """``N(mean, std²)`` truncated to the absolute bounds ``[a, b]``."""
    return _fill(tensor, "trunc-normal", seed, mean=mean, std=std, lo=a, hi=b)


def constant_(tensor: torch.Tensor, val: float) -> torch.Tensor:
    """Every entry ``val``."""
    return _fill(tensor, "constant", val=val)


def ones_(tensor: torch.Tensor) -> torch.Tensor:
    """Every entry 1."""
    return _fill(tensor, "ones")


def zeros_(tensor: torch.Tensor) -> torch.Tensor:
    """Every entry 0."""
    return _fill(tensor, "zeros")


def eye_(tensor: torch.Tensor) -> torch.Tensor:
    """The 2-D identity."""
    return _fill(tensor, "eye")


def dirac_(tensor: torch.Tensor, groups: int = 1) -> torch.Tensor:
    """The Dirac delta of a 3-5-D convolution weight, with ``groups``."""
    return _fill(tensor, "dirac", groups=groups)


def xavier_uniform_(tensor: torch.Tensor, gain: float = 1.0, seed: int = 0) -> torch.Tensor:
    """``U(−a, a)``, ``a = gain·√(6/(fan_in + fan_out))``."""
    return _fill(tensor, "xavier-uniform", seed, gain=gain)


def xavier_normal_(tensor: torch.Tensor, gain: float = 1.0, seed: int = 0) -> torch.Tensor:
    """``N(0, std²)``, ``std = gain·√(2/(fan_in + fan_out))``."""
    return _fill(tensor, "xavier-normal", seed, gain=gain)


def kaiming_uniform_(
    tensor: torch.Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    seed: int = 0,
) -> torch.Tensor:
    """``U(−b, b)``, ``b = √3·gain(nonlinearity, a)/√fan``."""
    return _fill(tensor, "kaiming-uniform", seed, a=a, mode=mode, nonlinearity=nonlinearity)


def kaiming_normal_(
    tensor: torch.Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    seed: int = 0,
) -> torch.Tensor:
    """``N(0, std²)``, ``std = gain(nonlinearity, a)/√fan``."""
    return _fill(tensor, "kaiming-normal", seed, a=a, mode=mode, nonlinearity=nonlinearity)


def orthogonal_(tensor: torch.Tensor, method: str = "qr", seed: int = 0, gain: float = 1.0) -> torch.Tensor:
    """The tensor viewed as ``size(0) x rest`` filled with a random orthogonal matrix times
    ``gain`` (orthonormal columns when tall, rows when wide), by ``qr`` (Haar, the law of
    ``torch.nn.init.orthogonal_``), ``svd``, ``householder`` or ``cayley``."""
    if method not in _init.ORTHO_METHODS:
        raise ValueError(f"unknown orthogonal method {method!r}: use one of {', '.join(_init.ORTHO_METHODS)}")
    return _fill(tensor, method, seed, gain=gain)


def sparse_(tensor: torch.Tensor, sparsity: float, std: float = 0.01, seed: int = 0) -> torch.Tensor:
    """A 2-D ``N(0, std²)`` matrix with ``ceil(sparsity·rows)`` zeros in every column."""
    return _fill(tensor, "sparse", seed, sparsity=sparsity, std=std)


def zero_init_(tensor: torch.Tensor) -> torch.Tensor:
    """ZerO initialisation (deterministic)."""
    return _fill(tensor, "zer-o")


def mimetic_(
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    v_weight: torch.Tensor,
    o_weight: torch.Tensor,
    heads: int,
    seed: int = 0,
) -> None:
    """Mimetic initialisation of four ``nn.Linear`` weights (``out x in``, ``d x d``) of one
    attention layer with ``heads`` heads: ``W_Q W_Kᵀ ≈ α₁Z₁ + β₁I`` per head,
    ``W_V W_O ≈ α₂Z₂ − β₂I`` (products in the ``x @ W`` convention)."""
    d = q_weight.shape[0]
    for w in (q_weight, k_weight, v_weight, o_weight):
        if tuple(w.shape) != (d, d):
            raise ValueError(f"mimetic_ needs four {d} x {d} weights, got shape {tuple(w.shape)}")
    m = _init.mimetic(d, heads, seed, dtype=np.float64)
    with torch.no_grad():
        for w, key in ((q_weight, "wq"), (k_weight, "wk"), (v_weight, "wv"), (o_weight, "wo")):
            w.copy_(torch.from_numpy(m[key].T.copy()).to(dtype=w.dtype, device=w.device))
