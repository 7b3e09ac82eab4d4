"""Process-group setup for data-parallel training: one process per device, launched by
``torchrun`` (which sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), NCCL on CUDA and gloo on
the CPU. A plain ``python`` launch is a world of one, with no process group."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


@dataclasses.dataclass
class World:
    """This process's place in the job."""

    rank: int
    size: int
    local_rank: int
    device: torch.device
    backend: Optional[str]

    @property
    def main(self) -> bool:
        """Whether this process writes files and prints (rank 0)."""
        return self.rank == 0

    def all_reduce_sum(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` summed over every process (in place; itself in a world of one)."""
        if self.size > 1:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t

    def same_everywhere(self, values: list[int]) -> bool:
        """Whether every process holds the same ``values`` (true in a world of one)."""
        if self.size == 1:
            return True
        t = torch.tensor(values, dtype=torch.int64, device=self.device)
        hi, lo = t.clone(), t.clone()
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        return bool(torch.equal(hi, lo))

    def main_first(self, fn: Callable[[], T]) -> T:
        """``fn()`` on rank 0, then, once it succeeded there, on the other ranks. Opening a new
        run claims its ``--out`` (a lock and a write probe): ranks doing it at once raced and
        one refused the folder. A failure on rank 0 is raised there and stops the others with
        one line; nobody waits forever."""
        if self.size == 1:
            return fn()
        result, error = None, None
        if self.main:
            try:
                result = fn()
            except Exception as e:  # re-raised below, after the others know
                error = e
        ok = self.all_reduce_sum(torch.tensor([int(error is None)], dtype=torch.int64, device=self.device))
        if error is not None:
            raise error
        if int(ok.item()) < self.size:
            raise ValueError("rank 0 could not open the run: its message says why")
        return result if self.main else fn()

    def synchronize(self) -> None:
        """Waits for this process's device work (for timing); nothing on the CPU."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def close(self) -> None:
        """Leaves the process group."""
        if self.backend is not None and dist.is_initialized():
            dist.destroy_process_group()


def pick_device(name: str = "auto") -> torch.device:
    """``auto``: CUDA when ``torch.cuda.is_available()``, else the CPU; or ``cpu``/``cuda``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available to PyTorch; use --device cpu")
    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise ValueError(f"--device {name!r}: use auto, cpu or cuda")
    return torch.device(name)


def backend_for(device: torch.device) -> str:
    """The collective backend of a device: NCCL on CUDA, gloo on the CPU."""
    return "nccl" if device.type == "cuda" else "gloo"


def setup(device: str = "auto") -> World:
    """Joins the job ``torchrun`` started (NCCL on CUDA, gloo on the CPU), or makes a world of
    one. On CUDA each process uses the device of its ``LOCAL_RANK``."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", local % max(torch.cuda.device_count(), 1))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = None
    if size > 1:
        backend = backend_for(dev)
        dist.init_process_group(backend=backend)
    return World(rank=rank, size=size, local_rank=local, device=dev, backend=backend)
