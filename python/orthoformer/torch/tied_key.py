"""The key projection of an ``orthogonal-tied`` Llama-family model: :class:`TiedKey`."""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import nn


class TiedKey(nn.Module):
    """``k_proj`` of an ``orthogonal-tied`` Llama-family model: the keys are the queries
    (``q_proj`` itself computes them, its bias included). It holds no tensor of its own, yet
    its ``state_dict`` writes a copy of ``q_proj``'s under ``k_proj``'s names, so
    ``save_pretrained`` (safetensors or not) sees no shared tensor and the folder is a standard
    checkpoint that plain ``transformers`` loads; loading takes nothing from it."""

    def __init__(self, q: nn.Module) -> None:
        super().__init__()
        # Not a submodule: `q_proj` is registered once, where it is, and moves with the model.
        self.__dict__["_q"] = q

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._q(x)

    @property
    def weight(self) -> torch.Tensor:
        """The queries' matrix (the keys are the queries)."""
        return self._q.weight

    @property
    def bias(self) -> Optional[torch.Tensor]:
        """The queries' bias."""
        return self._q.bias

    @property
    def in_features(self) -> int:
        return self._q.in_features

    @property
    def out_features(self) -> int:
        return self._q.out_features

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        for name in ("weight", "bias"):
            t = getattr(self._q, name, None)
            if t is not None:
                destination[prefix + name] = t.detach().clone()

    def _load_from_state_dict(self, state_dict: Any, prefix: str, *args: Any) -> None:
        pass  # the queries' values are loaded into q_proj; these copies carry nothing more

    def extra_repr(self) -> str:
        return "the keys are the queries (q_proj)"


__all__ = ["TiedKey"]
