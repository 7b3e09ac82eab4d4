"""How the model is spread over the processes: replicated with DistributedDataParallel (the
default under ``torchrun``), or sharded with FSDP2 (``--fsdp``: ``fully_shard`` on every block
and on the root, so each rank holds ``1/N`` of every parameter, gradient and AdamW moment;
the mixed-precision policy gathers parameters in the autocast dtype and reduces gradients in
fp32). Checkpoints are written from full tensors gathered here, in the library's format, so
a sharded run resumes unsharded (or on another number of ranks) and the other way round.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Optional

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .distributed import World


def is_dtensor(t: torch.Tensor) -> bool:
    """Whether ``t`` is a sharded ``DTensor`` (FSDP2's parameters and their state)."""
    return hasattr(t, "full_tensor") and hasattr(t, "to_local")


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``t`` (``t`` itself when it is not sharded)."""
    return t.to_local() if is_dtensor(t) else t


def full(t: torch.Tensor) -> torch.Tensor:
    """The whole of ``t`` on every rank (a collective for a ``DTensor``: all ranks call it)."""
    return t.full_tensor() if is_dtensor(t) else t


class Sharding:
    """The model as the processes run it: :attr:`module` is what the forward calls (the model,
    DDP around it, or the FSDP-sharded model), compiled when asked."""

    def __init__(
        self, model: nn.Module, world: World, fsdp: bool, param_dtype: Optional[torch.dtype], compile: bool
    ) -> None:
        self.model, self.world, self.fsdp = model, world, fsdp
        self.ddp: Optional[DistributedDataParallel] = None
        if fsdp:
            self._fully_shard(model, param_dtype)
            module: nn.Module = model
        elif world.size > 1:
            ids = [world.device.index] if world.device.type == "cuda" else None
            # Frozen buffers are the same on every rank (regenerated from the seed): no broadcast,
            # not even at wrapping. Newer PyTorch deprecates the flag, but its replacement still
            # syncs at init, so the flag stays and its warning is not the user's business.
            inner = torch.compile(model) if compile else model
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*broadcast_buffers.*", category=FutureWarning)
                self.ddp = DistributedDataParallel(inner, device_ids=ids, broadcast_buffers=False)
            module = self.ddp
            compile = False
        else:
            module = model
        self.module = torch.compile(module) if compile else module

    def _fully_shard(self, model: nn.Module, param_dtype: Optional[torch.dtype]) -> None:
        try:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        except ImportError:  # torch before 2.6 keeps FSDP2 under _composable
            try:
                from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
            except ImportError:
                raise ValueError(
                    f"--fsdp needs FSDP2 (torch 2.4 or newer); this is torch {torch.__version__}"
                ) from None
        if self.world.size > 1:
            from torch.distributed.device_mesh import init_device_mesh

            mesh = init_device_mesh(self.world.device.type, (self.world.size,))
        else:
            raise ValueError("--fsdp shards over processes: launch with torchrun --nproc_per_node=N (N > 1)")
        mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
        # The GPT's blocks are `h`, the Llama's `layers`.
        for block in model.h if hasattr(model, "h") else model.layers:
            fully_shard(block, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)

    def sync_gradients(self, sync: bool) -> Any:
        """A context for one micro-step: gradients are reduced across ranks only when
        ``sync`` (the last micro-step of a step), as DDP's ``no_sync`` and FSDP's
        ``set_requires_gradient_sync`` arrange."""
        if self.fsdp:
            self.model.set_requires_gradient_sync(sync)
            return contextlib.nullcontext()
        if self.ddp is not None and not sync:
            return self.ddp.no_sync()
        return contextlib.nullcontext()

    def load_moments(
        self,
        opt: torch.optim.Optimizer,
        p: torch.Tensor,
        t: int,
        m: torch.Tensor,
        v: torch.Tensor,
        fused: bool,
    ) -> None:
        """Sets AdamW's state of parameter ``p`` from full moments ``m``, ``v`` after ``t``
        steps (each rank keeps its own shard of them under FSDP; the fused kernel keeps its
        step count on the device)."""
        if is_dtensor(p):
            from torch.distributed.tensor import distribute_tensor

            m = distribute_tensor(m.to(p.device), p.device_mesh, p.placements)
            v = distribute_tensor(v.to(p.device), p.device_mesh, p.placements)
        opt.state[p] = {
            "step": torch.tensor(float(t), dtype=torch.float32, device=p.device if fused else "cpu"),
            "exp_avg": m.to(p.device),
            "exp_avg_sq": v.to(p.device),
        }
