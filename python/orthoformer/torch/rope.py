"""Rotary position embeddings as the library has them (``nn::rope``, the GPT's
``Position::Rope``): Hugging Face's half-split pairs (dimension ``i`` of a head turns with
dimension ``i + D/2``, ``transformers``' ``rotate_half``), base θ = 10,000, angles
``p·θ^(-2i/D)`` computed in float64 and rounded once, so the PyTorch GPT rotates exactly as
the Rust one does.

The tables are cached per ``(device, dtype, D, θ)`` and grown by doubling: every layer of
every forward reads a slice of one table instead of recomputing float64 angles. A position's
angle does not depend on the table's length, so a slice is bit-identical to the table
computed for that range alone.
"""

from __future__ import annotations

import threading

import torch

#: The library's base θ (``ROPE_THETA``).
THETA = 10_000.0

#: ``(device, dtype, d, theta) -> (cos, sin)``, each ``(L, D/2)`` for positions ``0 .. L``.
_CACHE: dict[tuple[torch.device, torch.dtype, int, float], tuple[torch.Tensor, torch.Tensor]] = {}
_LOCK = threading.Lock()


def _compute(
    start: int, length: int, d: int, theta: float, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    half = d // 2
    # float64 angles, rounded once: what `rope::tables` does.
    pos = torch.arange(start, start + length, device=device, dtype=torch.float64)
    inv = theta ** (-2.0 * torch.arange(half, device=device, dtype=torch.float64) / d)
    angle = pos[:, None] * inv[None, :]
    return angle.cos().to(dtype), angle.sin().to(dtype)


def _cacheable(device: torch.device) -> bool:
    # Tracing (torch.compile's fake tensors) and meta tensors must not land in the cache.
    compiling = getattr(torch.compiler, "is_compiling", lambda: False)()
    return not compiling and device.type != "meta"


def tables(
    start: int, length: int, d: int, *, theta: float = THETA, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` ``(length, D/2)`` of positions ``start .. start + length`` for heads
    of even width ``d``, in ``dtype`` on ``device`` (float64 angles, as the library's); slices
    of a cached table (treat them as read-only)."""
    device = torch.device(device)
    if not _cacheable(device):
        return _compute(start, length, d, float(theta), device, dtype)
    key = (device, dtype, int(d), float(theta))
    end = start + length
    hit = _CACHE.get(key)
    if hit is None or hit[0].shape[0] < end:
        with _LOCK:
            hit = _CACHE.get(key)
            if hit is None or hit[0].shape[0] < end:
                size = max(64, 1 << max(end - 1, 1).bit_length())
                # Built outside inference mode and autograd, so a table first made under
                # torch.inference_mode() can still be saved for a later backward pass.
                with torch.inference_mode(False), torch.no_grad():
                    hit = _compute(0, size, d, float(theta), device, dtype)
                _CACHE[key] = hit
    cos, sin = hit
    return cos[start:end], sin[start:end]


def clear_cache() -> None:
    """Drops every cached table (to free device memory)."""
    with _LOCK:
        _CACHE.clear()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` ``(B, H, T, D)`` with row ``t`` of every head turned by the angles of row ``t`` of
    ``cos``/``sin`` ``(T, D/2)``: ``(a, b) -> (a·c - b·s, b·c + a·s)`` for ``a = x[..., i]``,
    ``b = x[..., i + D/2]``."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


__all__ = ["THETA", "clear_cache", "rotate", "tables"]
