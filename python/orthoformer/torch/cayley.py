"""Riemannian gradient descent on the orthogonal group by the Cayley transform (Wen & Yin
2013; Li, Fuxin & Todorovic 2020; the optimiser SpinQuant learns its rotations with): from an
orthogonal ``R`` and the Euclidean gradient ``G`` of a loss at ``R``, the skew matrix
``A = G Rᵀ - R Gᵀ`` and the step ``R' = (I + ½ η A)⁻¹ (I - ½ η A) R``. ``R'`` is orthogonal
for every ``η`` (the Cayley transform of a skew matrix is), so no projection is needed, and
``dR'/dη`` at 0 is ``-(G - R Gᵀ R)``: the negative gradient projected on the tangent space.
Seed 000's Cayley generator is the same map of a skew matrix to an orthogonal one."""

from __future__ import annotations

import torch


def cayley_step(r: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    """One descent step of size ``lr`` from the orthogonal ``r`` (``(n, n)``, or a batch
    ``(..., n, n)``) along ``-grad``; the result is orthogonal to the precision of ``r``'s
    dtype (use float64 to keep a long run orthogonal)."""
    a = grad @ r.transpose(-1, -2) - r @ grad.transpose(-1, -2)
    eye = torch.eye(r.shape[-1], dtype=r.dtype, device=r.device).expand_as(a)
    return torch.linalg.solve(eye + 0.5 * lr * a, (eye - 0.5 * lr * a) @ r)


def orthogonality_error(r: torch.Tensor) -> float:
    """``max |Rᵀ R - I|`` over every matrix of ``r``."""
    eye = torch.eye(r.shape[-1], dtype=r.dtype, device=r.device)
    return float((r.transpose(-1, -2) @ r - eye).abs().max())


__all__ = ["cayley_step", "orthogonality_error"]
