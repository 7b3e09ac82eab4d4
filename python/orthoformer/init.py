"""Initialisers of the Rust library (``init``), returning NumPy arrays: the four random
orthogonal generators and every ``torch.nn.init`` function with PyTorch's semantics and fan
rules, plus ZerO and mimetic attention initialisation.

Every value is computed in float64 by the library from a seed (ChaCha8), so the same seed
gives the same bits on every machine, and rounded once to ``dtype`` (default float32, as
``orthoformer init`` writes). ``generate("qr", (R, C), seed=S, gain=G)`` is, to the bit,
``orthoformer init --method qr --rows R --cols C --seed S --gain G --out x.npy``. Bad
arguments raise ``ValueError`` with the library's message.
"""

from __future__ import annotations

from typing import Any, Optional
from collections.abc import Sequence

import numpy as np

from . import _native

DType = Any
ShapeArg = Sequence[int]

#: Every method of ``orthoformer init --list``: ``(name, description)``.
METHODS: list[tuple[str, str]] = list(_native.init_methods())
#: The four orthogonal generators.
ORTHO_METHODS = ("qr", "svd", "householder", "cayley")
#: Every nonlinearity :func:`calculate_gain` accepts.
NONLINEARITIES: list[str] = list(_native.init_nonlinearities())


def _array(buf: bytearray, shape: ShapeArg, dtype: DType) -> np.ndarray:
    values = np.frombuffer(buf, dtype="<f8").reshape(tuple(shape))
    return values if np.dtype(dtype) == np.float64 else values.astype(dtype)


def generate(
    method: str, shape: ShapeArg, seed: int = 0, dtype: DType = np.float32, **params: Any
) -> np.ndarray:
    """``orthoformer init --method METHOD --shape SHAPE --seed SEED`` with ``params`` (any of
    ``gain, a, mode, nonlinearity, mean, std, lo, hi, val, sparsity, groups``; unset ones take
    the PyTorch default). Orthogonal methods view the shape as ``shape[0] x rest``."""
    shape = [int(d) for d in shape]
    if any(d < 0 for d in shape):
        raise ValueError(f"shape {shape} has a negative dimension")
    return _array(_native.init_generate(method, shape, seed, params), shape, dtype)


def orthogonal(
    rows: int, cols: int, method: str = "qr", seed: int = 0, gain: float = 1.0, dtype: DType = np.float32
) -> np.ndarray:
    """A ``rows x cols`` random orthogonal matrix: orthonormal columns when tall
    (``WᵀW = gain² I``), rows when wide, by ``qr`` (Householder QR with the sign fix, Haar),
    ``svd`` (polar factor, Haar), ``householder`` (Stewart's reflectors, Haar) or ``cayley``
    (not Haar)."""
    if method not in ORTHO_METHODS:
        raise ValueError(f"unknown orthogonal method {method!r}: use one of {', '.join(ORTHO_METHODS)}")
    return generate(method, (rows, cols), seed, dtype, gain=gain)


def uniform(
    shape: ShapeArg, lo: float = 0.0, hi: float = 1.0, seed: int = 0, dtype: DType = np.float32
) -> np.ndarray:
    """``U(lo, hi)``."""
    return generate("uniform", shape, seed, dtype, lo=lo, hi=hi)


def normal(
    shape: ShapeArg, mean: float = 0.0, std: float = 1.0, seed: int = 0, dtype: DType = np.float32
) -> np.ndarray:
    """``N(mean, std²)``."""
    return generate("normal", shape, seed, dtype, mean=mean, std=std)


def trunc_normal(
    shape: ShapeArg,
    mean: float = 0.0,
    std: float = 1.0,
    lo: float = -2.0,
    hi: float = 2.0,
    seed: int = 0,
    dtype: DType = np.float32,
) -> np.ndarray:
    """``N(mean, std²)`` truncated to the absolute bounds ``[lo, hi]``."""
    return generate("trunc-normal", shape, seed, dtype, mean=mean, std=std, lo=lo, hi=hi)


def constant(shape: ShapeArg, val: float, dtype: DType = np.float32) -> np.ndarray:
    """Every entry ``val``."""
    return generate("constant", shape, 0, dtype, val=val)


def ones(shape: ShapeArg, dtype: DType = np.float32) -> np.ndarray:
    """Every entry 1."""
    return generate("ones", shape, 0, dtype)


def zeros(shape: ShapeArg, dtype: DType = np.float32) -> np.ndarray:
    """Every entry 0."""
    return generate("zeros", shape, 0, dtype)


def eye(shape: ShapeArg, dtype: DType = np.float32) -> np.ndarray:
    """The 2-D identity (ones on the main diagonal)."""
    return generate("eye", shape, 0, dtype)


def dirac(shape: ShapeArg, groups: int = 1, dtype: DType = np.float32) -> np.ndarray:
    """The Dirac delta of a 3-5-D convolution weight ``[out, in, k...]`` with ``groups``."""
    return generate("dirac", shape, 0, dtype, groups=groups)


def xavier_uniform(
    shape: ShapeArg, gain: float = 1.0, seed: int = 0, dtype: DType = np.float32
) -> np.ndarray:
    """``U(−a, a)``, ``a = gain·√(6/(fan_in + fan_out))``."""
    return generate("xavier-uniform", shape, seed, dtype, gain=gain)


def xavier_normal(shape: ShapeArg, gain: float = 1.0, seed: int = 0, dtype: DType = np.float32) -> np.ndarray:
    """``N(0, std²)``, ``std = gain·√(2/(fan_in + fan_out))``."""
    return generate("xavier-normal", shape, seed, dtype, gain=gain)


def kaiming_uniform(
    shape: ShapeArg,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    seed: int = 0,
    dtype: DType = np.float32,
) -> np.ndarray:
    """``U(−b, b)``, ``b = √3·gain(nonlinearity, a)/√fan``."""
    return generate("kaiming-uniform", shape, seed, dtype, a=a, mode=mode, nonlinearity=nonlinearity)


def kaiming_normal(
    shape: ShapeArg,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    seed: int = 0,
    dtype: DType = np.float32,
) -> np.ndarray:
    """``N(0, std²)``, ``std = gain(nonlinearity, a)/√fan``."""
    return generate("kaiming-normal", shape, seed, dtype, a=a, mode=mode, nonlinearity=nonlinearity)


def torch_orthogonal(
    shape: ShapeArg, gain: float = 1.0, seed: int = 0, dtype: DType = np.float32
) -> np.ndarray:
    """``torch.nn.init.orthogonal_``'s law: the tensor viewed as ``size(0) x rest``, a Haar
    (sign-fixed QR) matrix times ``gain``."""
    return generate("orthogonal", shape, seed, dtype, gain=gain)


def sparse(
    shape: ShapeArg, sparsity: float, std: float = 0.01, seed: int = 0, dtype: DType = np.float32
) -> np.ndarray:
    """A 2-D ``N(0, std²)`` matrix with ``ceil(sparsity·rows)`` zeros in every column."""
    return generate("sparse", shape, seed, dtype, sparsity=sparsity, std=std)


def zero_init(shape: ShapeArg, dtype: DType = np.float32) -> np.ndarray:
    """ZerO: identity, partial identity or a scaled Hadamard block (deterministic)."""
    return generate("zer-o", shape, 0, dtype)


def mimetic(
    d: int,
    heads: int,
    seed: int = 0,
    params: Optional[tuple[float, float, float, float]] = None,
    dtype: DType = np.float32,
) -> dict[str, Any]:
    """Mimetic attention initialisation for width ``d``: ``wq, wk, wv, wo`` (``d x d``, used as
    ``x @ W``) with ``W_Q W_Kᵀ ≈ α₁Z₁ + β₁I`` per head and ``W_V W_O ≈ α₂Z₂ − β₂I``;
    ``params = (α₁, β₁, α₂, β₂)`` (default the paper's). Also returns ``qk_rel_error`` and
    ``vo_rel_error``."""
    arrays, qk, vo = _native.init_mimetic(d, heads, seed, params)
    out: dict[str, Any] = {k: _array(a, (d, d), dtype) for k, a in zip(("wq", "wk", "wv", "wo"), arrays)}
    out["qk_rel_error"], out["vo_rel_error"] = qk, vo
    return out


def calculate_gain(nonlinearity: str, param: Optional[float] = None) -> float:
    """``torch.nn.init.calculate_gain``: the recommended scale for a nonlinearity."""
    return _native.init_calculate_gain(nonlinearity, param)


def fans(shape: ShapeArg) -> tuple[int, int]:
    """``(fan_in, fan_out)``: ``size(1)·rf`` and ``size(0)·rf``, ``rf = ∏ size(2..)``."""
    return tuple(_native.init_fans([int(d) for d in shape]))  # type: ignore[return-value]


def ortho_error(w: Any, gain: float = 1.0) -> float:
    """``‖WᵀW − gain² I‖_F`` for a tall matrix, ``‖WWᵀ − gain² I‖_F`` for a wide one,
    accumulated in float64 (so a float32 matrix's own rounding is what is measured)."""
    a = np.asarray(w, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"ortho_error needs a 2-D matrix, got shape {a.shape}")
    return _native.init_ortho_error(
        np.ascontiguousarray(a, dtype="<f8").tobytes(), a.shape[0], a.shape[1], gain
    )
