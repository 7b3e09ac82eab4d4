"""LoRA (Hu et al. 2021) for ``python -m orthoformer.finetune --modes lora``: each target
linear keeps its weight frozen and learns a low-rank update,
``y = W·x + (α/r)·B·(A·x)``, with ``A`` (``r x in``) drawn Kaiming-uniform as ``peft`` draws
it and ``B`` (``out x r``) zero, so training starts at the base model. Everything else
(embeddings, norms, the other linears) is frozen.

Rotating the base model does not change what LoRA can reach: a reader ``W·Q`` needs the
update ``ΔW·Q``, of the same rank and singular values, so the effective rank of the learned
update (:func:`effective_rank`) can be compared across rotated bases as it is. What a
rotation changes is the path: AdamW scales each coordinate on its own, and ``A``'s random
start is drawn in the rotated coordinates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ..validate import InputError, integer, number
from .frozen import FrozenProjection

#: The linears of a Llama-family decoder layer, by their ``transformers`` names.
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def owner_of(block: Any, target: str) -> Any:
    """The submodule of a decoder layer holding the linear ``target``: attention or the MLP."""
    return block.self_attn if target in LINEARS[:4] else block.mlp


class LoRALinear(nn.Module):
    """``base`` (frozen) plus ``(alpha/rank)·B·A``; ``A`` drawn from ``generator``."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, generator: torch.Generator) -> None:
        super().__init__()
        out_f, in_f = base.weight.shape
        self.base = base
        base.weight.requires_grad_(False)
        if base.bias is not None:
            base.bias.requires_grad_(False)
        self.rank, self.scale = rank, alpha / rank
        kw = {"device": base.weight.device, "dtype": base.weight.dtype}
        a = torch.empty(rank, in_f, **kw)
        # peft's draw: kaiming_uniform_(a=√5), i.e. U(−1/√in, 1/√in).
        bound = 1.0 / math.sqrt(in_f)
        a.copy_(torch.rand(rank, in_f, generator=generator).mul_(2 * bound).sub_(bound))
        self.lora_a = nn.Parameter(a)
        self.lora_b = nn.Parameter(torch.zeros(out_f, rank, **kw))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (
            self.base(x)
            + nn.functional.linear(nn.functional.linear(x, self.lora_a), self.lora_b) * self.scale
        )

    def delta(self) -> torch.Tensor:
        """The learned update ``ΔW = (α/r)·B·A`` (``out x in``)."""
        return (self.lora_b @ self.lora_a).detach() * self.scale


def check_lora(
    rank: Any, alpha: Any, targets: Sequence[str], *, flags: bool = False
) -> tuple[int, float, list[str]]:
    """The rank (≥ 1), alpha (> 0) and target names (each one of :data:`LINEARS`, none
    twice), named as flags (``--lora-rank``) or keywords."""
    name = (lambda f: "--" + f.replace("_", "-")) if flags else (lambda f: f)
    rank = integer(name("lora_rank"), rank, lo=1)
    alpha = number(name("lora_alpha"), alpha, lo=0.0, lo_open=True)
    targets = list(targets)
    for t in targets:
        if t not in LINEARS:
            raise InputError(f"{name('lora_targets')}: {t!r} is not one of {', '.join(LINEARS)}")
    if not targets or len(set(targets)) != len(targets):
        raise InputError(
            f"{name('lora_targets')}: name each of {', '.join(LINEARS)} at most once, at least one"
        )
    return rank, alpha, targets


def add_lora_(model: Any, rank: int, alpha: float, targets: Sequence[str], *, seed: int = 0) -> list[str]:
    """Freezes every parameter of ``model`` (a ``transformers`` Llama-family causal LM) and
    wraps each target linear of every decoder layer in a :class:`LoRALinear` (``A`` drawn
    from ``seed``, layer by layer in order); returns the wrapped modules' names."""
    rank, alpha, targets = check_lora(rank, alpha, targets)
    layers = getattr(getattr(model, "model", model), "layers", None)
    if layers is None:
        raise ValueError("LoRA needs a Llama-family model (model.model.layers)")
    for p in model.parameters():
        p.requires_grad_(False)
    gen = torch.Generator().manual_seed(seed)
    names = []
    for i, block in enumerate(layers):
        for t in targets:
            owner = owner_of(block, t)
            base = getattr(owner, t, None)
            # A frozen projection is an nn.Linear too (for peft), but holds no weight to adapt.
            if not isinstance(base, nn.Linear) or isinstance(base, FrozenProjection):
                raise ValueError(f"layer {i} has no linear {t}: LoRA cannot target it")
            setattr(owner, t, LoRALinear(base, rank, alpha, gen))
            names.append(f"layers.{i}.{t}")
    return names


def lora_deltas(model: Any) -> dict[str, torch.Tensor]:
    """Every :class:`LoRALinear`'s update, by module name."""
    return {n: m.delta() for n, m in model.named_modules() if isinstance(m, LoRALinear)}


def effective_rank(delta: torch.Tensor) -> dict[str, float]:
    """Of an update's singular values ``s``: the entropy effective rank ``exp(H(s/Σs))`` (Roy
    and Vetterli 2007) and the number of values holding 90% of ``‖ΔW‖²``; both invariant under
    rotations of either side, so comparable across rotated bases."""
    s = torch.linalg.svdvals(delta.double())
    total = float(s.sum())
    if total == 0.0:
        return {"effective_rank": 0.0, "rank90": 0.0}
    p = s / total
    p = p[p > 0]
    energy = torch.cumsum(s**2, 0) / float((s**2).sum())
    return {
        "effective_rank": math.exp(float(-(p * p.log()).sum())),
        "rank90": float(int((energy < 0.9).sum()) + 1),
    }


def update_ranks(deltas: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The mean of :func:`effective_rank` over updates, overall and by target kind."""
    per = {n: effective_rank(d) for n, d in deltas.items()}
    kinds: dict[str, list[dict[str, float]]] = {}
    for n, r in per.items():
        kinds.setdefault(n.rsplit(".", 1)[-1], []).append(r)

    def mean(rs: list[dict[str, float]], key: str) -> float:
        return sum(r[key] for r in rs) / len(rs)

    every = list(per.values())
    return {
        "modules": len(per),
        "effective_rank": mean(every, "effective_rank") if every else 0.0,
        "rank90": mean(every, "rank90") if every else 0.0,
        "by_target": {
            k: {"effective_rank": mean(v, "effective_rank"), "rank90": mean(v, "rank90")}
            for k, v in kinds.items()
        },
    }
