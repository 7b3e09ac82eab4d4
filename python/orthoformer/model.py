"""``RustGPT``: the library's GPT (``model::Gpt``) with NumPy in and out: initialisation,
logits, loss, gradients and model files. It is the reference the PyTorch GPT is tested
against, and what :func:`orthoformer.save_checkpoint` writes from."""

from __future__ import annotations

import json
import os
from os import PathLike
from typing import Any, Optional, Union

import numpy as np

from . import _native
from .config import GPTConfig
from .data import ids_bytes


def f32(buf: Union[bytes, bytearray], shape: Optional[tuple[int, ...]] = None) -> np.ndarray:
    """Little-endian f32 bytes from the native module as a writable array (no copy)."""
    a = np.frombuffer(buf, dtype="<f4")
    return a if shape is None else a.reshape(shape)


def f32_bytes(a: Any) -> bytes:
    """An array as little-endian f32 bytes."""
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


class FrozenTensor:
    """A frozen projection (``h.{l}.attn.{q,k}.weight``, ``C x C``, ``out x in``) and, for a
    Hadamard projection, the signs and output permutation of its fast transform."""

    def __init__(self, row: tuple) -> None:
        name, shape, data, fast = row
        self.name: str = name
        self.value: np.ndarray = f32(data, tuple(shape))
        self.signs: Optional[np.ndarray] = None if fast is None else f32(fast[0])
        self.perm: Optional[np.ndarray] = None if fast is None else np.asarray(fast[1], dtype=np.int64)


def frozen_tensors(rows: list) -> dict[str, FrozenTensor]:
    """Native frozen rows by name."""
    return {r[0]: FrozenTensor(r) for r in rows}


def unflatten(flat: np.ndarray, table: list) -> dict[str, np.ndarray]:
    """The flat parameter buffer split by the tensor table ``(name, shape, offset, decay)``."""
    out = {}
    for name, shape, offset, _ in table:
        n = int(np.prod(shape))
        out[name] = flat[offset : offset + n].reshape(shape)
    return out


def flatten(params: dict[str, Any], table: list) -> bytes:
    """Named tensors as the flat buffer of ``table``; every name required, no extra ones,
    shapes checked."""
    names = {row[0] for row in table}
    extra = sorted(set(params) - names)
    if extra:
        raise ValueError(f"{extra[0]} is not a trainable tensor of this model")
    total = sum(int(np.prod(row[1])) for row in table)
    flat = np.empty(total, dtype="<f4")
    for name, shape, offset, _ in table:
        if name not in params:
            raise ValueError(f"tensor {name} is missing")
        a = np.asarray(params[name], dtype=np.float32)
        if tuple(a.shape) != tuple(shape):
            raise ValueError(f"tensor {name} has shape {tuple(a.shape)}, expected {tuple(shape)}")
        flat[offset : offset + a.size] = a.reshape(-1)
    return flat.tobytes()


class RustGPT:
    """The library's GPT. ``RustGPT(config, seed)`` is the model ``orthoformer train
    --model-seed SEED`` starts from (GPT-2 init drawn from ``seed``, frozen ``W_Q, W_K`` from
    the config's generator); :meth:`load` reads a model file."""

    def __init__(self, config: Union[GPTConfig, str], seed: int = 0, *, _native_model: Any = None) -> None:
        if _native_model is not None:
            self._m = _native_model
        else:
            cfg = GPTConfig.preset(config) if isinstance(config, str) else config
            self._m = _native.Gpt(cfg.to_json(), seed)

    @classmethod
    def load(cls, path: Union[str, PathLike[str]]) -> RustGPT:
        """Reads a model file (``model.safetensors`` of a checkpoint folder)."""
        return cls(None, _native_model=_native.Gpt.load(os.fspath(path)))  # type: ignore[arg-type]

    def save(self, path: Union[str, PathLike[str]]) -> None:
        """Writes the model file (atomically; frozen weights are stored too)."""
        self._m.save(os.fspath(path))

    @property
    def config(self) -> GPTConfig:
        """The configuration."""
        return GPTConfig(**json.loads(self._m.config_json()))

    @property
    def table(self) -> list:
        """The trainable tensors ``(name, shape, offset, decay)`` in buffer order."""
        return self._m.tensors()

    def params(self) -> dict[str, np.ndarray]:
        """Every trainable tensor by name (PyTorch layout, weights ``out x in``)."""
        return unflatten(f32(self._m.params()), self.table)

    def set_params(self, params: dict[str, Any]) -> None:
        """Replaces every trainable tensor (all names required)."""
        self._m.set_params(flatten(params, self.table))

    def grads(self) -> dict[str, np.ndarray]:
        """The accumulated gradients by name."""
        return unflatten(f32(self._m.grads()), self.table)

    def frozen(self) -> dict[str, FrozenTensor]:
        """The frozen projections by name."""
        return frozen_tensors(self._m.frozen())

    def logits(self, tokens: Any) -> np.ndarray:
        """Logits ``(B, T, V)`` of ``tokens`` ``(B, T)`` (no dropout)."""
        x = np.asarray(tokens)
        b, t = x.shape
        return f32(self._m.logits(ids_bytes(x), b, t), (b, t, self.config.vocab_size))

    def loss(self, inputs: Any, targets: Any) -> float:
        """Mean cross-entropy of a ``(B, T)`` batch (no dropout)."""
        x = np.asarray(inputs)
        return self._m.loss(ids_bytes(x), ids_bytes(targets), *x.shape)

    def forward_backward(self, inputs: Any, targets: Any, dropout_seed: int = 0) -> float:
        """Mean cross-entropy; its gradients are added to :meth:`grads`."""
        x = np.asarray(inputs)
        return self._m.forward_backward(ids_bytes(x), ids_bytes(targets), *x.shape, dropout_seed)

    def zero_grad(self) -> None:
        """Sets every gradient to zero."""
        self._m.zero_grad()
