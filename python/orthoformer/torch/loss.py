"""The language-model loss of :class:`~orthoformer.torch.GPT` and
:class:`~orthoformer.torch.Llama`, under either convention for what the loss is given:

- ``targets`` (nanoGPT's): the next token of each position, already shifted, ``(B, T)``;
  every position is scored;
- ``labels`` (Hugging Face's): the input ids themselves (or a copy with ``-100`` where no loss
  is wanted), ``(B, T)``, shifted here: position ``t``'s logits are scored against
  ``labels[:, t + 1]``, the last position is not scored. ``model(idx, labels=idx)`` is the
  ``transformers`` idiom and gives the loss ``LlamaForCausalLM`` gives.

``-100`` is ignored in both (``F.cross_entropy``'s ``ignore_index``). Passing both is refused:
the two differ by one position, and a mix-up gives a plausible but wrong loss.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ..validate import InputError

#: The label that scores nothing (``transformers``' and ``F.cross_entropy``'s).
IGNORE = -100


def _check(name: str, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype.is_floating_point:
        got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise InputError(f"{name} must be a (B, T) tensor of token ids like idx {shape}, got {got}")


def lm_loss(
    logits: torch.Tensor, targets: Optional[torch.Tensor], labels: Optional[torch.Tensor]
) -> Optional[torch.Tensor]:
    """The mean cross-entropy of ``logits`` ``(B, T, V)`` against ``targets`` (already
    shifted) or ``labels`` (shifted here), ``None`` without either; computed in float32."""
    if targets is not None and labels is not None:
        raise InputError(
            "pass targets (the next tokens, already shifted: nanoGPT's) or labels (the input ids, "
            "shifted here: Hugging Face's), not both"
        )
    shape = tuple(logits.shape[:2])
    if targets is not None:
        _check("targets", targets, shape)
        scored, want = logits, targets
    elif labels is not None:
        _check("labels", labels, shape)
        scored, want = logits[:, :-1], labels[:, 1:]
    else:
        return None
    return F.cross_entropy(scored.float().flatten(0, 1), want.flatten(), ignore_index=IGNORE)


__all__ = ["IGNORE", "lm_loss"]
