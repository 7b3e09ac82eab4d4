"""Rotary position embeddings as the library has them (``nn::rope``, the GPT's
``Position::Rope``): Hugging Face's half-split pairs (dimension ``i`` of a head turns with
dimension ``i + D/2``), base θ = 10,000, angles ``p·θ^(-2i/D)`` computed in float64 and
rounded once, so the PyTorch GPT rotates exactly as the Rust one does."""

from __future__ import annotations

import torch

#: The library's base θ (``ROPE_THETA``).
THETA = 10_000.0


def tables(
    start: int, length: int, d: int, *, theta: float = THETA, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` ``(length, D/2)`` of positions ``start .. start + length`` for heads
    of even width ``d``, in ``dtype`` on ``device`` (float64 angles, as the library's)."""
    half = d // 2
    # float64 angles, rounded once: what `rope::tables` does.
    pos = torch.arange(start, start + length, device=device, dtype=torch.float64)
    inv = theta ** (-2.0 * torch.arange(half, device=device, dtype=torch.float64) / d)
    angle = pos[:, None] * inv[None, :]
    return angle.cos().to(dtype), angle.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` ``(B, H, T, D)`` with row ``t`` of every head turned by the angles of row ``t`` of
    ``cos``/``sin`` ``(T, D/2)``: ``(a, b) -> (a·c - b·s, b·c + a·s)`` for ``a = x[..., i]``,
    ``b = x[..., i + D/2]``."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


__all__ = ["THETA", "rotate", "tables"]
