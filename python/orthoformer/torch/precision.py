"""How fast the trainer runs on its device: the autocast dtype (``--dtype``), ``torch.compile``
(``--compile``), fused AdamW and TF32 matmuls. Defaults pick the fastest correct setting for
the device: on CUDA bf16 autocast when the GPU supports it (else fp16 with a gradient
scaler), compiled, fused AdamW, TF32 on; on the CPU fp32, eager, the plain AdamW. Weights,
gradients and optimizer state stay fp32 in every mode (autocast casts per operation), so
checkpoints are the same format whatever the dtype.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Any, Optional

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclasses.dataclass
class Speed:
    """The settings one run uses (see the module doc)."""

    device: torch.device
    dtype: str
    compile: bool
    fused: bool
    tf32: bool

    @property
    def autocast_dtype(self) -> Optional[torch.dtype]:
        """The autocast dtype, ``None`` for fp32 (no autocast)."""
        return None if self.dtype == "fp32" else DTYPES[self.dtype]

    def autocast(self) -> Any:
        """The forward pass's autocast context (a no-op for fp32)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def scaler(self) -> Optional[Any]:
        """A gradient scaler for fp16 (its small range underflows gradients), else ``None``."""
        if self.dtype != "fp16":
            return None
        return torch.amp.GradScaler(self.device.type)

    def describe(self) -> str:
        """The one-line summary printed at start."""
        parts = [
            f"dtype {self.dtype}" + (" (autocast)" if self.dtype != "fp32" else ""),
            f"compile {'on' if self.compile else 'off'}",
            f"{'fused' if self.fused else 'plain'} AdamW",
        ]
        if self.device.type == "cuda":
            parts.append(f"TF32 {'on' if self.tf32 else 'off'}")
        return ", ".join(parts)


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 autocast runs natively on ``device`` (Ampere or newer on CUDA)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return True


def fused_adamw_supported(device: torch.device) -> bool:
    """Whether ``torch.optim.AdamW(fused=True)`` runs on ``device`` (CUDA here: on the CPU
    the plain loop is the library's arithmetic, which the tests compare against)."""
    return device.type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters


def resolve(device: torch.device, dtype: str = "auto", compile: str = "auto") -> Speed:
    """The settings for ``device``: ``dtype`` ``auto|fp32|bf16|fp16`` and ``compile``
    ``auto|on|off`` (``auto``: the device's fastest correct choice, see the module doc)."""
    cuda = device.type == "cuda"
    if dtype == "auto":
        dtype = ("bf16" if bf16_supported(device) else "fp16") if cuda else "fp32"
    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype}: use auto, fp32, bf16 or fp16")
    if dtype == "bf16" and not bf16_supported(device):
        raise ValueError("--dtype bf16: this GPU has no bf16 support; use --dtype fp16 (with loss scaling)")
    if compile not in ("auto", "on", "off"):
        raise ValueError(f"--compile {compile}: use auto, on or off")
    compiled = cuda if compile == "auto" else compile == "on"
    return Speed(device=device, dtype=dtype, compile=compiled, fused=fused_adamw_supported(device), tf32=cuda)


def apply(speed: Speed) -> None:
    """Process-wide settings of ``speed``: TF32 matmuls and convolutions on CUDA."""
    if speed.device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = speed.tf32
        torch.backends.cudnn.allow_tf32 = speed.tf32


#: Dense peak TFLOP/s of common GPUs by autocast dtype (bf16/fp16; fp32 runs on TF32 cores),
#: from the vendors' data sheets, for MFU; ``--peak-tflops`` overrides it.
PEAK_TFLOPS = {
    "H200": {"bf16": 989.4, "fp32": 494.7},
    "H100 PCIe": {"bf16": 756.0, "fp32": 378.0},
    "H100": {"bf16": 989.4, "fp32": 494.7},
    "A100": {"bf16": 312.0, "fp32": 156.0},
    "L40S": {"bf16": 362.1, "fp32": 183.0},
    "A10G": {"bf16": 70.0, "fp32": 35.0},
    "A10": {"bf16": 125.0, "fp32": 62.5},
    "L4": {"bf16": 121.0, "fp32": 60.0},
    "RTX 4090": {"bf16": 165.2, "fp32": 82.6},
    "V100": {"bf16": 125.0, "fp32": 15.7},
}


def peak_flops(speed: Speed, override_tflops: Optional[float] = None) -> Optional[float]:
    """Peak FLOP/s for MFU: ``override_tflops`` when given, else the GPU's data-sheet figure
    for the run's dtype; ``None`` when unknown (the CPU, an unlisted GPU)."""
    if override_tflops is not None:
        return override_tflops * 1e12
    if speed.device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(speed.device)
    for key, peaks in PEAK_TFLOPS.items():  # longer names first where they overlap (H100 PCIe)
        if key in name:
            return peaks["fp32" if speed.dtype == "fp32" else "bf16"] * 1e12
    return None
