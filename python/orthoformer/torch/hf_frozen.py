"""The frozen projections :func:`~orthoformer.torch.hf.freeze_qk_` installs in a
``transformers`` model: :class:`FrozenLinear` (a Llama-family ``q_proj``/``k_proj``) and
:class:`FrozenQKVConv1D` (GPT-2's fused ``c_attn``).

Both are ``nn.Linear`` subclasses, so libraries that wrap a model's linears by type accept
them: ``peft``'s LoRA with its default targets (``q_proj``, ``v_proj``; GPT-2's ``c_attn``),
where :mod:`orthoformer.torch.peft_lora` keeps the adapter off the frozen rows. They say which
of their output rows are frozen (:attr:`lora_frozen_rows`: the leading ones) and take a
merged adapter's delta on the others (:meth:`add_delta_`). ``transformers``' own
``init_weights`` skips them (``_is_hf_initialized``): they initialise themselves, from the
seed, in ``reset_parameters``; its generic ``nn.Linear`` branch would draw the frozen matrix
from ``N(0, 0.02²)``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .frozen import FrozenOrthogonalLinear

#: Draws a layer's frozen ``(W_Q, W_K)`` again (``W_K`` ``None`` when tied).
Draw = Callable[[], tuple[torch.Tensor, Optional[torch.Tensor]]]


class FrozenLinear(FrozenOrthogonalLinear, nn.Linear):
    """A :class:`~orthoformer.torch.frozen.FrozenOrthogonalLinear` that is an ``nn.Linear``:
    the Q or K projection of a frozen Llama-family model. ``weight`` is still a buffer (out of
    ``parameters()``); every output row is frozen, so a LoRA on it carries nothing."""

    # transformers' `initialize_weights` skips modules marked initialised (see the module doc).
    _is_hf_initialized = True

    @property
    def lora_frozen_rows(self) -> int:
        """How many leading output rows an adapter must leave alone: all of them."""
        return self.out_features

    def add_delta_(self, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> None:
        """Adds an adapter's ``(out x in)`` weight and ``(out,)`` bias deltas to what trains
        here: nothing (every row is frozen; a masked adapter's rows are zero)."""


class FrozenQKVConv1D(nn.Linear):
    """GPT-2's fused ``c_attn`` (``y = x·W + b``, ``W`` ``C x 3C`` = ``[W_Qᵀ | W_Kᵀ | W_Vᵀ]``)
    with ``W_Q, W_K`` frozen buffers and ``W_V`` and the biases trainable. Its ``state_dict``
    is GPT-2's (``weight``, ``bias``, fused, frozen values included), so ``save_pretrained``
    writes a checkpoint plain ``transformers`` loads. ``keep_bias`` keeps the Q/K biases of
    ``c_attn`` (restoring a frozen model) instead of starting them at zero.

    As an ``nn.Linear`` (``C -> 3C``), :attr:`weight` and :attr:`bias` read the fused values
    in ``nn.Linear``'s layout (``3C x C``, a copy: write through ``load_state_dict``); the
    first ``2C`` output rows (Q and K) are frozen, so a LoRA on ``c_attn`` adapts ``V`` only.

    ``draw`` gives the frozen matrices again from their seed: with it, they are drawn anew
    whenever the buffers are allocated anew (``to_empty`` of a meta-built model,
    ``reset_parameters``), never left uninitialised; ``reset_parameters`` also draws ``W_V``
    as GPT-2 does (normal, ``std``) and zeroes the biases."""

    _is_hf_initialized = True

    def __init__(
        self,
        c_attn: nn.Module,
        wq: torch.Tensor,
        wk: Optional[torch.Tensor],
        keep_bias: bool = False,
        draw: Optional[Draw] = None,
        std: float = 0.02,
    ) -> None:
        nn.Module.__init__(self)  # not nn.Linear's: its tensors are laid out below
        w, b = c_attn.weight.detach(), c_attn.bias.detach()
        c = w.shape[0]
        self.c, self.tied, self._draw, self.std = c, wk is None, draw, std
        self.in_features, self.out_features = c, 3 * c
        kw: dict[str, Any] = {"device": w.device, "dtype": w.dtype}
        self.register_buffer("q_weight", wq.to(**kw), persistent=False)
        self.register_buffer("k_weight", (wq if wk is None else wk).to(**kw), persistent=False)
        # Q/K biases start at zero, as the variant starts them, unless restoring trained ones.
        bq, bk = (b[:c], b[c : 2 * c]) if keep_bias else (torch.zeros(c, **kw), torch.zeros(c, **kw))
        self.q_bias = nn.Parameter(bq.clone())
        self.k_bias = None if self.tied else nn.Parameter(bk.clone())
        self.v_weight = nn.Parameter(w[:, 2 * c :].clone())  # Conv1D layout, in x out
        self.v_bias = nn.Parameter(b[2 * c :].clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = F.linear(x, self.q_weight, self.q_bias)
        k = q if self.tied else F.linear(x, self.k_weight, self.k_bias)
        v = x @ self.v_weight + self.v_bias
        return torch.cat((q, k, v), dim=-1)

    @property  # type: ignore[override]
    def weight(self) -> torch.Tensor:
        """The fused ``3C x C`` matrix in ``nn.Linear``'s layout (a copy)."""
        return self.fused()[0].T.detach()

    @property  # type: ignore[override]
    def bias(self) -> torch.Tensor:
        """The fused ``3C`` bias (a copy)."""
        return self.fused()[1].detach()

    @property
    def lora_frozen_rows(self) -> int:
        """How many leading output rows an adapter must leave alone: Q's and K's, ``2C``."""
        return 2 * self.c

    def add_delta_(self, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> None:
        """Adds an adapter's ``(3C x C)`` weight and ``(3C,)`` bias deltas to what trains: the
        ``V`` rows (the Q/K rows of a masked adapter are zero, and the matrices frozen)."""
        c = self.c
        with torch.no_grad():
            self.v_weight.add_(weight[2 * c :].T.to(self.v_weight.dtype))
            if bias is not None:
                self.v_bias.add_(bias[2 * c :].to(self.v_bias.dtype))

    def _regenerate(self) -> None:
        if self._draw is None or self.q_weight.is_meta:
            return
        wq, wk = self._draw()
        with torch.no_grad():
            self.q_weight.copy_(wq.to(dtype=self.q_weight.dtype))
            self.k_weight.copy_((wq if wk is None else wk).to(dtype=self.k_weight.dtype))

    def reset_parameters(self) -> None:
        """What the standard initialisation loop calls: the frozen matrices drawn again from
        their seed, ``W_V`` drawn as GPT-2 draws it, the biases zero."""
        if self.q_weight.is_meta:
            return
        self._regenerate()
        with torch.no_grad():
            nn.init.normal_(self.v_weight, std=self.std)
            for p in (self.q_bias, self.k_bias, self.v_bias):
                if p is not None:
                    p.zero_()

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        # `to_empty` comes through here: frozen buffers allocated anew off `meta` are drawn
        # again (a plain move keeps them).
        was_meta = self.q_weight.is_meta
        out = super()._apply(fn, recurse)
        if was_meta and not self.q_weight.is_meta:
            self._regenerate()
        return out

    def fused(self) -> tuple[torch.Tensor, torch.Tensor]:
        """GPT-2's ``(weight, bias)`` of this layer (``C x 3C``, ``3C``)."""
        kb = self.q_bias if self.k_bias is None else self.k_bias
        w = torch.cat((self.q_weight.T, self.k_weight.T, self.v_weight), dim=1)
        return w, torch.cat((self.q_bias, kb, self.v_bias))

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        w, b = self.fused()
        destination[prefix + "weight"] = w if keep_vars else w.detach()
        destination[prefix + "bias"] = b if keep_vars else b.detach()

    def _load_from_state_dict(
        self,
        state_dict: Any,
        prefix: str,
        meta: Any,
        strict: bool,
        missing: list,
        unexpected: list,
        errors: list,
    ) -> None:
        wkey, bkey = prefix + "weight", prefix + "bias"
        if wkey not in state_dict or bkey not in state_dict:
            missing.extend(k for k in (wkey, bkey) if k not in state_dict)
            return
        c = self.c
        w, b = state_dict[wkey], state_dict[bkey]
        if self.q_weight.is_meta:
            # A meta-built module (`assign=True`, FSDP): copying into meta keeps nothing, so
            # the loaded values become the tensors.
            self.q_weight = w[:, :c].T.detach().clone()
            self.k_weight = w[:, c : 2 * c].T.detach().clone()
            self.v_weight = nn.Parameter(w[:, 2 * c :].detach().clone())
            self.q_bias = nn.Parameter(b[:c].detach().clone())
            if self.k_bias is not None:
                self.k_bias = nn.Parameter(b[c : 2 * c].detach().clone())
            self.v_bias = nn.Parameter(b[2 * c :].detach().clone())
            return
        with torch.no_grad():
            self.q_weight.copy_(w[:, :c].T)
            self.k_weight.copy_(w[:, c : 2 * c].T)
            self.v_weight.copy_(w[:, 2 * c :])
            self.q_bias.copy_(b[:c])
            if self.k_bias is not None:
                self.k_bias.copy_(b[c : 2 * c])
            self.v_bias.copy_(b[2 * c :])

    def extra_repr(self) -> str:
        return f"in_features={self.c}, out_features={3 * self.c}, frozen Q/K{' (tied)' if self.tied else ''}"


__all__ = ["Draw", "FrozenLinear", "FrozenQKVConv1D"]
