"""The frozen Hadamard projection (subsampled randomised Hadamard transform) of the
``orthogonal-hadamard`` variant as a fast transform in PyTorch, the same computation as the
library's ``nn::srht``:

    y = x Wᵀ + b,   W[o, i] = H[π(o), i]·s_i / √C

with random signs ``s``, the unnormalised Hadamard matrix ``H`` of order ``C`` (a Kronecker
product of dense Paley factors and a Sylvester ``H_{2^a}``) and an output permutation ``π``,
all drawn by the library from the layer's seed. Applied factor by factor (butterflies for the
Sylvester part), it costs ``O(C·Σ factor orders)`` per token instead of ``2C²``; autograd gives
the input gradient; the transform has no trainable part.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch import nn

from .. import _native, validate
from .frozen import FrozenProjection
from .functional import Device, head_seed


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


class FrozenHadamardLinear(FrozenProjection):
    """``y = x Wᵀ + b`` for the frozen SRHT ``W`` (``C x C``) drawn from ``(seed, tensor)`` as
    the library draws the ``orthogonal-hadamard`` projections (``seed=None`` draws one from
    torch's generator), applied by the fast transform. The signs and permutation are
    non-persistent buffers regenerated from the seed; :attr:`weight` is the dense matrix,
    computed on demand (for checkpoints and reference, never in the forward)."""

    FROZEN = ("signs", "perm")

    def __init__(
        self,
        features: int,
        *,
        bias: bool = False,
        seed: Optional[int] = None,
        tensor: int = 0,
        seed_in_state_dict: bool = True,
        device: Device = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        c = validate.integer("features", features, lo=1)
        self.features, self.method = c, "hadamard"
        self._init_seed(seed, tensor, seed_in_state_dict, device)
        self.factors = _factors(c)
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        self.register_buffer("signs", torch.empty(c, **kw), persistent=False)
        self.register_buffer("perm", torch.empty(c, dtype=torch.long, device=device), persistent=False)
        for i, (m, f) in enumerate(self.factors):
            if f is not None:
                self.register_buffer(f"factor{i}", torch.empty(m, m, **kw), persistent=False)
        # The library scales in f32: 1 / √C rounded once.
        self.scale = float(np.float32(1.0) / np.sqrt(np.float32(c)))
        self.bias = nn.Parameter(torch.zeros(c, **kw)) if bias else None
        self._fill_unless_meta()

    def _regenerate(self) -> None:
        # The signs and permutation from the seed (pinned ones are left alone); the Kronecker
        # factors depend on the width only.
        with torch.no_grad():
            for i, (_, f) in enumerate(self.factors):
                if f is not None:
                    buf = getattr(self, f"factor{i}")
                    buf.copy_(f.to(dtype=buf.dtype))
            if not self.pinned:
                signs, perm = _native.srht(self.features, head_seed(self.seed, self.tensor, 0))
                self.signs.copy_(
                    torch.from_numpy(np.frombuffer(signs, dtype="<f4").copy()).to(self.signs.dtype)
                )
                self.perm.copy_(torch.as_tensor(perm, dtype=torch.long))

    def set_transform_(self, signs: Any, perm: Any) -> FrozenHadamardLinear:
        """Replaces the signs and permutation by given ones (an imported SRHT), which are then
        stored whole (persistent buffers, in ``state_dict``)."""
        self._pin()
        with torch.no_grad():
            self.signs.copy_(torch.as_tensor(np.asarray(signs)).to(self.signs.dtype))
            self.perm.copy_(torch.as_tensor(np.asarray(perm), dtype=torch.long))
        return self

    def _device_factors(self) -> list[tuple[int, Optional[torch.Tensor]]]:
        return [
            (m, None if f is None else getattr(self, f"factor{i}")) for i, (m, f) in enumerate(self.factors)
        ]

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """``x Wᵀ`` (no bias) by the fast transform."""
        c = x.shape[-1]
        u = (x * self.signs).reshape(-1, c)
        v = hadamard_transform(u, self._device_factors())
        return (v.index_select(1, self.perm) * self.scale).reshape(x.shape)

    @property
    def weight(self) -> torch.Tensor:
        """The dense ``W`` (``out x in``), equal to the library's dense form of the SRHT."""
        with torch.no_grad():
            eye = torch.eye(self.features, dtype=self.signs.dtype, device=self.signs.device)
            return self.transform(eye).T.contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.transform(x)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        orders = "·".join(str(m) for m, _ in self.factors)
        src = "stored" if self.pinned else f"seed={self.seed}, tensor={self.tensor}"
        return f"C={self.features}, factors={orders}, bias={self.bias is not None}, {src}"


def check_dense(weight: torch.Tensor, signs: torch.Tensor, perm: torch.Tensor) -> float:
    """Largest difference between the fast transform with ``signs, perm`` and the dense
    ``weight`` on the identity (a self-check; 0 up to float rounding)."""
    c = weight.shape[0]
    if not c:
        return 0.0
    p = FrozenHadamardLinear(c, seed=0, dtype=weight.dtype).set_transform_(signs, perm)
    eye = torch.eye(c, dtype=weight.dtype)
    return float((p(eye) - eye @ weight.T).abs().max())


__all__ = ["FrozenHadamardLinear", "check_dense", "hadamard_transform"]
