"""Drop-in PyTorch modules for orthogonal attention in any model:
:class:`OrthogonalAttention` (all eight variants of the library), the frozen projections
:class:`FrozenOrthogonalLinear` and :class:`FrozenHadamardLinear`, and
:func:`ignore_frozen_in_ddp` for a model one wraps in DistributedDataParallel oneself.

    from orthoformer.torch.nn import OrthogonalAttention
    attn = OrthogonalAttention(768, 12, variant="orthogonal", seed=0)   # (B, T, 768) -> (B, T, 768)
    attn = OrthogonalAttention(768, 12, seed=0, rope=True, learned_temperature=True)  # RoPE, τ per head

Frozen matrices are non-persistent buffers regenerated from ``(seed, method, layer)``: never
parameters, never in an optimizer, absent from ``state_dict`` (which records the seed in a
``frozen_seed`` entry, so loading it restores the same matrices). Give each block its index,
``OrthogonalAttention(768, 12, seed=0, layer=i)``, so each layer draws its own matrices; a
second live module with the same seed and no ``layer=`` warns, since it would repeat the
first one's. The matrices are right however a model is built: directly, on ``meta`` then
``to_empty`` and the ``reset_parameters`` loop (FSDP's ``param_init_fn``, ``fully_shard``),
``load_state_dict(..., assign=True)``, ``.to(...)``.
"""

from __future__ import annotations

from torch import nn

from ..config import ATTENTIONS
from .attention import KVCache, OrthogonalAttention
from .frozen import FrozenOrthogonalLinear, FrozenProjection
from .hadamard import FrozenHadamardLinear

#: The eight attention variants, as ``orthoformer train --attention`` names them.
VARIANTS: tuple[str, ...] = tuple(ATTENTIONS)


def ignore_frozen_in_ddp(model: nn.Module) -> nn.Module:
    """Marks the frozen buffers of every :class:`FrozenProjection` inside ``model`` so that a
    ``DistributedDataParallel(model)`` made afterwards neither broadcasts them when wrapping
    nor with every forward (every rank regenerates the same values from the seed). Returns
    ``model``."""
    names = [
        f"{prefix}.{b}" if prefix else b
        for prefix, m in model.named_modules()
        if isinstance(m, FrozenProjection)
        for b, _ in m.named_buffers(recurse=False)
    ]
    old = list(getattr(model, "_ddp_params_and_buffers_to_ignore", []))
    model._ddp_params_and_buffers_to_ignore = sorted(set(old) | set(names))
    return model


__all__ = [
    "FrozenHadamardLinear",
    "FrozenOrthogonalLinear",
    "FrozenProjection",
    "KVCache",
    "OrthogonalAttention",
    "VARIANTS",
    "ignore_frozen_in_ddp",
]
