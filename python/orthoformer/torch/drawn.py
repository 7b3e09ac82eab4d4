"""A trainable projection started at the frozen orthogonal draw: :class:`DrawnInitLinear`,
the ``W_Q, W_K`` of the ``orthogonal-trained`` variant. Its weight is an ordinary
``nn.Parameter`` (trained, decayed, in ``state_dict``) whose initial value is, bit for bit,
the matrix :class:`~orthoformer.torch.frozen.FrozenOrthogonalLinear` would freeze for the same
``(seed, method, tensor)``: the control that separates freezing from the initial scale
(orthonormal entries have std ``1/√C``, not the 0.02 of a trained projection's start)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .functional import Device, check_method, frozen_orthogonal_weight


class DrawnInitLinear(nn.Linear):
    """``nn.Linear(in_features, n_head·d_head)`` whose :meth:`reset_parameters` writes the
    frozen draw of ``(seed, method, tensor)`` (head ``h``'s rows: a random ``in_features x
    d_head`` matrix with orthonormal columns, transposed) into the weight and zero into the
    bias; training then moves it like any weight. On ``meta`` nothing is drawn until
    ``to_empty`` and :meth:`reset_parameters`."""

    def __init__(
        self,
        in_features: int,
        n_head: int,
        d_head: int,
        *,
        seed: int,
        bias: bool = False,
        method: str = "qr",
        tensor: int = 0,
        device: Device = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        # Set before nn.Linear's constructor, which calls reset_parameters.
        self.n_head, self.d_head = n_head, d_head
        self.method, self.seed, self.tensor = check_method(method), seed, tensor
        super().__init__(in_features, n_head * d_head, bias=bias, device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """The weight back to the frozen draw, the bias to zero (as built)."""
        if self.weight.is_meta:
            return
        w = frozen_orthogonal_weight(
            self.in_features, self.n_head, self.d_head, method=self.method, seed=self.seed, tensor=self.tensor
        )
        with torch.no_grad():
            self.weight.copy_(w.to(device=self.weight.device, dtype=self.weight.dtype))
            if self.bias is not None:
                self.bias.zero_()

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, start=method={self.method}, seed={self.seed}, tensor={self.tensor}"


__all__ = ["DrawnInitLinear"]
