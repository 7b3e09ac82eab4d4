"""The frozen Hadamard projection (subsampled randomised Hadamard transform) of the
``orthogonal-hadamard`` variant as a fast transform in PyTorch, the same computation as the
library's ``nn::srht``:

    y = x Wᵀ + b,   W[o, i] = H[π(o), i]·s_i / √C

with random signs ``s``, the unnormalised Hadamard matrix ``H`` of order ``C`` (a Kronecker
product of dense Paley factors and a Sylvester ``H_{2^a}``) and an output permutation ``π``,
all drawn by the library from the layer's seed. Applied factor by factor (butterflies for the
Sylvester part), it costs ``O(C·Σ factor orders)`` per token instead of ``2C²``; autograd gives
the input gradient, and ``W`` gets none: it is a buffer.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch import nn

from .. import _native


def _factors(c: int) -> list[tuple[int, Optional[torch.Tensor]]]:
    """The Kronecker factors of ``H_C`` (outermost first): ``(m, None)`` for Sylvester,
    ``(m, F)`` for a dense ``m x m`` factor."""
    out = []
    for m, dense in _native.hadamard_factors(c):
        f = (
            None
            if dense is None
            else torch.from_numpy(np.frombuffer(dense, dtype="<f8").reshape(m, m).astype(np.float32))
        )
        out.append((m, f))
    return out


def hadamard_transform(u: torch.Tensor, factors: list[tuple[int, Optional[torch.Tensor]]]) -> torch.Tensor:
    """``v = H·u`` for each row of ``u`` ``(N, C)``, ``H`` the Kronecker product of
    ``factors``."""
    n, c = u.shape
    inner = c
    for m, f in factors:
        inner //= m
        if f is None:
            # H_m = H_2 ⊗ … ⊗ H_2: one butterfly per bit of the index within the factor.
            s = m
            while s > 1:
                u = u.reshape(n, -1, 2, (s // 2) * inner)
                a, b = u.unbind(2)
                u = torch.stack((a + b, a - b), dim=2)
                s //= 2
        else:
            # (N, outer, m, inner): v[..., j, :] = Σ_k F[j, k] u[..., k, :].
            u = torch.matmul(f.to(u.dtype), u.reshape(n, -1, m, inner))
    return u.reshape(n, c)


class HadamardProjection(nn.Module):
    """``y = x Wᵀ + b`` for the frozen SRHT ``W`` (``C x C``): ``weight`` is its dense form (a
    buffer, for checkpoints and reference), applied by the fast transform."""

    def __init__(self, weight: torch.Tensor, signs: torch.Tensor, perm: torch.Tensor, bias: bool) -> None:
        super().__init__()
        c = weight.shape[0]
        self.register_buffer("weight", weight)
        self.register_buffer("signs", signs.to(weight.dtype), persistent=False)
        self.register_buffer("perm", perm.to(torch.long), persistent=False)
        self.factors = _factors(c)
        for i, (_, f) in enumerate(self.factors):
            if f is not None:
                self.register_buffer(f"factor{i}", f, persistent=False)
        # The library scales in f32: 1 / √C rounded once.
        self.scale = float(np.float32(1.0) / np.sqrt(np.float32(c)))
        self.bias = nn.Parameter(torch.zeros(c)) if bias else None

    def _device_factors(self) -> list[tuple[int, Optional[torch.Tensor]]]:
        return [
            (m, None if f is None else getattr(self, f"factor{i}")) for i, (m, f) in enumerate(self.factors)
        ]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[-1]
        u = (x * self.signs).reshape(-1, c)
        v = hadamard_transform(u, self._device_factors())
        y = v.index_select(1, self.perm) * self.scale
        y = y.reshape(x.shape)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        orders = "·".join(str(m) for m, _ in self.factors)
        return f"C={self.weight.shape[0]}, factors={orders}, bias={self.bias is not None}"


def check_dense(weight: torch.Tensor, signs: torch.Tensor, perm: torch.Tensor) -> float:
    """Largest difference between the fast transform and the dense ``weight`` on the identity
    (a self-check; 0 up to float rounding)."""
    p = HadamardProjection(weight, signs, perm, bias=False)
    c = weight.shape[0]
    eye = torch.eye(c, dtype=weight.dtype)
    return float((p(eye) - eye @ weight.T).abs().max()) if c else 0.0


__all__ = ["HadamardProjection", "check_dense", "hadamard_transform"]
