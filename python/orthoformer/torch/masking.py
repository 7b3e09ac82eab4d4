"""Masks beyond causal for :class:`~orthoformer.torch.attention.OrthogonalAttention`: a
user's ``attn_mask`` (boolean: ``True`` attends; or additive float scores) of the scores'
rank, ``(B, H, T, S)`` with any of them 1; a padding mask ``attention_mask`` ``(B, S)``
(Hugging Face's: 1 for a token, 0 for padding), a separate argument because a ``(B, S)``
tensor broadcast as scores would be read as ``(T, S)`` whenever ``B == T``; document masking
of packed sequences (``doc_ids``: a token attends only within its own document), both
combined with the causal mask; and linear attention under such a mask, in its masked
quadratic form.

Shapes: ``B`` batch, ``H`` query heads, ``T`` queries, ``S`` keys (``S = past + T`` with a
cache, where query ``i`` sits at position ``past + i``).
"""

from __future__ import annotations

from typing import Optional

import torch

from ..validate import InputError
from .functional import LINEAR_EPS, feature_map


def check_attn_mask(mask: object, shape: tuple[int, int, int, int]) -> torch.Tensor:
    """``mask`` when it is a boolean or floating 4-d tensor broadcastable to ``shape`` ``(B, H,
    T, S)``, else a one-line :class:`InputError`. Fewer dimensions are refused, not broadcast:
    a 2-d mask could be ``(T, S)`` or a ``(B, S)`` padding mask, alike when ``B == T``."""
    if not isinstance(mask, torch.Tensor):
        raise InputError(f"attn_mask must be a torch tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
        raise InputError(
            f"attn_mask must be boolean (True attends) or floating (added to the scores), not {mask.dtype}"
        )
    if mask.dim() != 4:
        raise InputError(
            f"attn_mask must have 4 dimensions (B, H, T, S), each may be 1, not shape {tuple(mask.shape)}: "
            "write a (T, S) mask as mask[None, None]; a (B, S) padding mask goes in attention_mask"
        )
    try:
        ok = torch.broadcast_shapes(tuple(mask.shape), shape) == shape
    except RuntimeError:
        ok = False
    if not ok:
        raise InputError(f"attn_mask of shape {tuple(mask.shape)} does not broadcast to (B, H, T, S) {shape}")
    return mask


def check_attention_mask(mask: object, b: int, s: int) -> torch.Tensor:
    """``mask`` as a boolean ``(B, S)`` tensor (``True``: a token) when it is boolean or holds
    integers 0 and 1 (a tokenizer's ``attention_mask``), else a one-line :class:`InputError`."""
    if not isinstance(mask, torch.Tensor):
        raise InputError(f"attention_mask must be a torch tensor, got {type(mask).__name__}")
    if tuple(mask.shape) != (b, s):
        raise InputError(
            f"attention_mask has shape {tuple(mask.shape)}, expected (B, S) = {(b, s)} (S keys: the cached "
            "ones and these); a mask over scores goes in attn_mask"
        )
    if mask.dtype == torch.bool:
        return mask
    if mask.dtype.is_floating_point or mask.dtype.is_complex or not bool(((mask == 0) | (mask == 1)).all()):
        raise InputError(
            f"attention_mask must be boolean or hold 0 and 1 (1: a token, 0: padding), {mask.dtype} given"
        )
    return mask == 1


def check_doc_ids(doc_ids: object, b: int, t: int) -> torch.Tensor:
    """``doc_ids`` when it is an integer tensor ``(B, T)``, else a one-line :class:`InputError`."""
    if not isinstance(doc_ids, torch.Tensor):
        raise InputError(f"doc_ids must be a torch tensor, got {type(doc_ids).__name__}")
    if doc_ids.dtype == torch.bool or doc_ids.dtype.is_floating_point or doc_ids.dtype.is_complex:
        raise InputError(f"doc_ids must hold integers (one document id per token), not {doc_ids.dtype}")
    if tuple(doc_ids.shape) != (b, t):
        raise InputError(f"doc_ids has shape {tuple(doc_ids.shape)}, expected (B, T) = {(b, t)}")
    return doc_ids


def keep_mask(
    t: int,
    s: int,
    *,
    causal: bool,
    doc_ids: Optional[torch.Tensor],
    attn_mask: Optional[torch.Tensor],
    device: torch.device,
    attention_mask: Optional[torch.Tensor] = None,
) -> Optional[torch.Tensor]:
    """Which keys each query may see, boolean, broadcastable to ``(B, H, T, S)``: causal (query
    ``i`` sees keys ``0 .. S - T + i``), within its document (``doc_ids`` ``(B, T)``, needs
    ``S = T``), where a boolean ``attn_mask`` is ``True``, and not padding (``attention_mask``
    ``(B, S)`` boolean, checked). ``None`` when nothing masks.

    A query left with no key by the padding (a left-padded row's padding, under the causal
    mask) sees every key instead, as ``transformers`` unmasks it for SDPA: its output is
    ignored, but an empty row would be NaN and reach the real tokens through the values."""
    keep: Optional[torch.Tensor] = None
    if causal:
        keys = torch.arange(s, device=device)
        keep = keys[None, :] <= (s - t + torch.arange(t, device=device))[:, None]  # (T, S)
    if doc_ids is not None:
        d = doc_ids.to(device)
        same = d[:, None, :, None] == d[:, None, None, :]  # (B, 1, T, T)
        keep = same if keep is None else keep & same
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        m = attn_mask.to(device)
        keep = m if keep is None else keep & m
    if attention_mask is not None:
        pad = attention_mask.to(device)[:, None, None, :]  # (B, 1, 1, S)
        keep = pad if keep is None else keep & pad
        keep = keep | ~keep.any(-1, keepdim=True)
    return keep


def softmax_mask(
    keep: Optional[torch.Tensor], attn_mask: Optional[torch.Tensor], dtype: torch.dtype
) -> Optional[torch.Tensor]:
    """The ``attn_mask`` for ``scaled_dot_product_attention``: ``keep`` as it is, or, with an
    additive ``attn_mask``, that mask (in the scores' ``dtype``) with ``-inf`` where ``keep``
    is ``False``."""
    if attn_mask is None or attn_mask.dtype == torch.bool:
        return keep
    add = attn_mask.to(dtype)
    if keep is None:
        return add
    # torch.where broadcasts both (a (T, S) mask with a (B, 1, T, S) keep, and back).
    return torch.where(keep, add, torch.tensor(float("-inf"), dtype=dtype, device=add.device))


def masked_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor
) -> torch.Tensor:
    """Linear (``elu + 1``) attention of ``q`` ``(B, H, T, D)`` over ``k, v`` ``(B, H, S, D)``
    where ``keep`` (broadcastable to ``(B, H, T, S)``) allows: ``o_i = Σ_j m_ij (φq_i·φk_j)
    v_j / (Σ_j m_ij φq_i·φk_j + ε)``. The quadratic form (``O(T·S·D)``): a mask has no running
    state to carry across chunks. With the causal mask alone it is the chunked kernel's
    function."""
    a = feature_map(q) @ feature_map(k).transpose(-1, -2)  # (B, H, T, S)
    a = a.masked_fill(~keep, 0.0)
    return (a @ v) / (a.sum(-1, keepdim=True) + LINEAR_EPS)


__all__ = [
    "check_attention_mask",
    "check_attn_mask",
    "check_doc_ids",
    "keep_mask",
    "masked_linear_attention",
    "softmax_mask",
]
