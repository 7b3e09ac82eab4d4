"""The library's initialisers filling PyTorch tensors in place, with ``torch.nn.init``'s
contract: the same names, positional arguments (``orthogonal_(w, 2.0)`` is gain 2) and fan
rules (``fan_in = size(1)·rf``, ``fan_out = size(0)·rf``), a ``generator=`` argument, and
draws that differ per call. Two keyword-only additions: ``seed=`` and, for
:func:`orthogonal_`, ``method=``.

- Without ``seed`` a seed is drawn from ``generator`` (default: torch's global generator), so
  every call gives new values, reproducible under ``torch.manual_seed`` as torch's own are.
- With ``seed=S`` the values are the library's for that seed, to the bit: the same as
  ``orthoformer init --seed S`` and ``orthoformer.init``.

Values are computed in float64 by the library and rounded once to the tensor's dtype; bad
inputs raise ``ValueError``; a zero-element tensor is left alone with a warning, as PyTorch
does.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
import torch

from .. import init as _init
from .. import validate

calculate_gain = _init.calculate_gain
Generator = Optional[torch.Generator]


def resolve_seed(seed: Optional[int], generator: Generator = None) -> int:
    """``seed`` itself, or a fresh one drawn from ``generator`` (torch's global generator when
    ``None``): one 62-bit integer per call. A given seed is checked: an integer from 0 to
    2**64 - 1, else an :class:`~orthoformer.validate.InputError`."""
    if seed is not None:
        return validate.seed("seed", seed)
    device = generator.device if generator is not None else "cpu"
    return int(torch.randint(0, 2**62, (1,), generator=generator, device=device).item())


def _fill(
    tensor: torch.Tensor, method: str, seed: Optional[int] = 0, generator: Generator = None, **params: Any
) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return tensor
    seed = resolve_seed(seed, generator)
    shape = tuple(tensor.shape) if tensor.dim() > 0 else (1,)
    values = _init.generate(method, shape, seed, np.float64, **params)
    with torch.no_grad():
        src = torch.from_numpy(values).reshape(tensor.shape)
        tensor.copy_(src.to(dtype=tensor.dtype, device=tensor.device))
    return tensor


def uniform_(
    tensor: torch.Tensor,
    a: float = 0.0,
    b: float = 1.0,
    generator: Generator = None,
    *,
    seed: Optional[int] = None,
) -> torch.Tensor:
    """``U(a, b)``."""
    return _fill(tensor, "uniform", seed, generator, lo=a, hi=b)


def normal_(
    tensor: torch.Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    generator: Generator = None,
    *,
    seed: Optional[int] = None,
) -> torch.Tensor:
    """``N(mean, std²)``."""
    return _fill(tensor, "normal", seed, generator, mean=mean, std=std)


def trunc_normal_(
    tensor: torch.Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator = None,
    *,
    seed: Optional[int] = None,
) -> torch.Tensor:
    """``N(mean, std²)`` truncated to the absolute bounds ``[a, b]``."""
    return _fill(tensor, "trunc-normal", seed, generator, mean=mean, std=std, lo=a, hi=b)


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


def xavier_uniform_(
    tensor: torch.Tensor, gain: float = 1.0, generator: Generator = None, *, seed: Optional[int] = None
) -> torch.Tensor:
    """``U(−a, a)``, ``a = gain·√(6/(fan_in + fan_out))``."""
    return _fill(tensor, "xavier-uniform", seed, generator, gain=gain)


def xavier_normal_(
    tensor: torch.Tensor, gain: float = 1.0, generator: Generator = None, *, seed: Optional[int] = None
) -> torch.Tensor:
    """``N(0, std²)``, ``std = gain·√(2/(fan_in + fan_out))``."""
    return _fill(tensor, "xavier-normal", seed, generator, gain=gain)


def kaiming_uniform_(
    tensor: torch.Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator = None,
    *,
    seed: Optional[int] = None,
) -> torch.Tensor:
    """``U(−b, b)``, ``b = √3·gain(nonlinearity, a)/√fan``."""
    return _fill(tensor, "kaiming-uniform", seed, generator, a=a, mode=mode, nonlinearity=nonlinearity)


def kaiming_normal_(
    tensor: torch.Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator = None,
    *,
    seed: Optional[int] = None,
) -> torch.Tensor:
    """``N(0, std²)``, ``std = gain(nonlinearity, a)/√fan``."""
    return _fill(tensor, "kaiming-normal", seed, generator, a=a, mode=mode, nonlinearity=nonlinearity)


def orthogonal_(
    tensor: torch.Tensor,
    gain: float = 1.0,
    generator: Generator = None,
    *,
    method: str = "qr",
    seed: Optional[int] = None,
) -> torch.Tensor:
    """The tensor viewed as ``size(0) x rest`` filled with a random orthogonal matrix times
    ``gain`` (orthonormal columns when tall, rows when wide), by ``method``: ``qr`` (Haar,
    the law of ``torch.nn.init.orthogonal_``), ``svd`` (Haar), ``householder`` (Haar) or
    ``cayley`` (not Haar)."""
    if method not in _init.ORTHO_METHODS:
        raise ValueError(f"unknown orthogonal method {method!r}: use one of {', '.join(_init.ORTHO_METHODS)}")
    return _fill(tensor, method, seed, generator, gain=gain)


def sparse_(
    tensor: torch.Tensor,
    sparsity: float,
    std: float = 0.01,
    generator: Generator = None,
    *,
    seed: Optional[int] = None,
) -> torch.Tensor:
    """A 2-D ``N(0, std²)`` matrix with ``ceil(sparsity·rows)`` zeros in every column."""
    return _fill(tensor, "sparse", seed, generator, sparsity=sparsity, std=std)


def zero_init_(tensor: torch.Tensor) -> torch.Tensor:
    """ZerO initialisation (deterministic)."""
    return _fill(tensor, "zer-o")


def mimetic_(
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    v_weight: torch.Tensor,
    o_weight: torch.Tensor,
    heads: int,
    generator: Generator = None,
    *,
    seed: Optional[int] = None,
) -> None:
    """Mimetic initialisation of four ``nn.Linear`` weights (``out x in``, ``d x d``) of one
    attention layer with ``heads`` heads: ``W_Q W_Kᵀ ≈ α₁Z₁ + β₁I`` per head,
    ``W_V W_O ≈ α₂Z₂ − β₂I`` (products in the ``x @ W`` convention)."""
    d = q_weight.shape[0]
    for w in (q_weight, k_weight, v_weight, o_weight):
        if tuple(w.shape) != (d, d):
            raise ValueError(f"mimetic_ needs four {d} x {d} weights, got shape {tuple(w.shape)}")
    m = _init.mimetic(d, heads, resolve_seed(seed, generator), dtype=np.float64)
    with torch.no_grad():
        for w, key in ((q_weight, "wq"), (k_weight, "wk"), (v_weight, "wv"), (o_weight, "wo")):
            w.copy_(torch.from_numpy(m[key].T.copy()).to(dtype=w.dtype, device=w.device))
