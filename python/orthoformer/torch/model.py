"""The Orthoformer GPT as a PyTorch ``nn.Module``, the same function as the library's
``model::Gpt`` (``src/model/gpt*.rs``):

    x = drop(wte[idx] + wpe[:T])
    pre-LN block:  x = x + drop(attn(ln1(x)));  x = x + drop(mlp(ln2(x)))
    post-LN block: x = ln1(x + drop(attn(x)));  x = ln2(x + drop(mlp(x)))
    logits = ln_f(x) @ wteᵀ                      (head tied to the token embedding)

with LayerNorm ε = 1e-5 (β only with ``norm_bias``), GELU in GPT-2's tanh form or exact (``gelu``), ``mlp = proj(gelu(fc(x)))``, dropout on
the embedding output, each residual branch and the softmax probabilities, biases as the config
says. Parameter names are the library's tensor names (``wte``, ``h.0.attn.q.weight``, ...),
so checkpoints map one to one; frozen ``W_Q, W_K`` are buffers holding the values the
library's generators make from the config's seed. Initialisation is the library's too:
``GPT(config, seed)`` starts from the weights ``orthoformer train --model-seed SEED`` does.
Dropout masks come from PyTorch's generator (same sites and rate, not the same bits).
"""

from __future__ import annotations

import os
from os import PathLike
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..checkpoint import load_checkpoint, save_checkpoint
from ..config import GPTConfig
from ..data import Data
from ..model import FrozenTensor, RustGPT, f32, frozen_tensors, unflatten
from .attention import CausalSelfAttention

LN_EPS = 1e-5


class MLP(nn.Module):
    """``proj(gelu(fc(x)))``, ``(B, T, C) -> (B, T, C)`` through width ``F``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.ffn_bias)
        self.proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.ffn_bias)
        # The library's `gelu`: GPT-2's tanh form or the exact erf form (nanoGPT's).
        self.approximate = "tanh" if cfg.gelu == "tanh" else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate=self.approximate))


class Block(nn.Module):
    """One transformer block, pre- or post-LN."""

    def __init__(self, cfg: GPTConfig, layer: int, frozen: dict[str, FrozenTensor]) -> None:
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=LN_EPS, bias=cfg.norm_bias)
        self.attn = CausalSelfAttention(cfg, layer, frozen)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=LN_EPS, bias=cfg.norm_bias)
        self.mlp = MLP(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre:
            x = x + self.drop(self.attn(self.ln1(x)))
            return x + self.drop(self.mlp(self.ln2(x)))
        x = self.ln1(x + self.drop(self.attn(x)))
        return self.ln2(x + self.drop(self.mlp(x)))


class GPT(nn.Module):
    """The GPT language model. ``GPT(config, seed)`` builds ``config`` (a :class:`GPTConfig`
    or a preset name) with the library's initialisation from ``seed``."""

    def __init__(
        self, config: Union[GPTConfig, str], seed: int = 0, *, _rust: Optional[RustGPT] = None
    ) -> None:
        super().__init__()
        cfg = GPTConfig.preset(config) if isinstance(config, str) else config.validate()
        rust = _rust if _rust is not None else RustGPT(cfg, seed)
        self.config = cfg
        self._build(cfg, rust.frozen())
        self.load_flat(f32(rust._m.params()), rust.table)

    @classmethod
    def from_parts(
        cls, config: GPTConfig, frozen_rows: list, table: list, flat: Union[bytes, bytearray]
    ) -> GPT:
        """A model from the native module's pieces: frozen rows, tensor table and flat
        parameters (what a training ``Session`` hands over)."""
        model = cls.__new__(cls)
        nn.Module.__init__(model)
        model.config = config
        model._build(config, frozen_tensors(frozen_rows))
        model.load_flat(f32(flat), table)
        return model

    def _build(self, cfg: GPTConfig, frozen: dict[str, FrozenTensor]) -> None:
        c = cfg.d_model
        self.wte = nn.Parameter(torch.empty(cfg.vocab_size, c))
        self.wpe = nn.Parameter(torch.empty(cfg.context, c))
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(Block(cfg, layer, frozen) for layer in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(c, eps=LN_EPS, bias=cfg.norm_bias)

    def load_flat(self, flat: np.ndarray, table: list) -> None:
        """Loads every trainable tensor from a flat buffer laid out by ``table`` (the
        library's ``(name, shape, offset, decay)`` rows); names and shapes must match."""
        self.load_named(unflatten(flat, table))

    def load_named(self, tensors: dict[str, Any]) -> None:
        """Loads every trainable tensor by the library's name; all must be present."""
        params = dict(self.named_parameters())
        missing = sorted(set(params) - set(tensors))
        extra = sorted(set(tensors) - set(params))
        if missing or extra:
            raise ValueError(f"tensors do not match the model: missing {missing}, unexpected {extra}")
        with torch.no_grad():
            for name, p in params.items():
                src = torch.as_tensor(np.asarray(tensors[name]))
                if tuple(src.shape) != tuple(p.shape):
                    raise ValueError(f"tensor {name} has shape {tuple(src.shape)}, expected {tuple(p.shape)}")
                p.copy_(src.to(dtype=p.dtype, device=p.device))

    def frozen_buffers(self) -> dict[str, torch.Tensor]:
        """The frozen projections by the library's name (``h.{l}.attn.{q,k}.weight``)."""
        return {n: b for n, b in self.named_buffers() if n.endswith(".weight")}

    def forward(
        self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Logits ``(B, T, V)`` of token ids ``idx`` ``(B, T)`` and, with ``targets``, the mean
        cross-entropy."""
        b, t = idx.shape
        if t > self.config.context:
            raise ValueError(f"sequence length {t} exceeds the model's context {self.config.context}")
        x = self.drop(self.wte[idx] + self.wpe[:t])
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(b * t, -1), targets.reshape(b * t))
        return logits, loss

    def decay_groups(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        """``(decayed, not decayed)`` parameters: 2-D tensors decay (weights and both
        embeddings), as the library's ``ParamStore`` says; norms and biases do not."""
        decay = [p for p in self.parameters() if p.dim() == 2]
        rest = [p for p in self.parameters() if p.dim() != 2]
        return decay, rest

    @classmethod
    def from_checkpoint(
        cls, path: Union[str, PathLike[str]], device: Union[str, torch.device, None] = None
    ) -> GPT:
        """The model of a checkpoint folder written by ``orthoformer train`` (or by
        :meth:`save_checkpoint`), verified by the library."""
        ckpt = load_checkpoint(path)
        model = cls(ckpt.config, _rust=ckpt.model)
        return model if device is None else model.to(device)

    def state_numpy(self) -> dict[str, np.ndarray]:
        """Every trainable tensor by name, as float32 NumPy arrays on the CPU."""
        return {n: p.detach().to("cpu", torch.float32).numpy() for n, p in self.named_parameters()}

    def save_checkpoint(
        self,
        path: Union[str, PathLike[str]],
        *,
        data: Optional[Data] = None,
        options: Optional[dict[str, Any]] = None,
        step: int = 0,
        model_seed: int = 0,
        metrics: Optional[list] = None,
        optimizer: Optional[torch.optim.Optimizer] = None,
    ) -> None:
        """Writes the model as a checkpoint folder in the command line's format (through the
        library), usable by ``orthoformer eval``, ``generate``, ``theory`` and ``train
        --resume``. ``data`` is the text and tokenizer it was trained with (default:
        TinyShakespeare, character level); ``optimizer`` an ``AdamW`` over this model's
        parameters whose moments are saved (default: zeros)."""
        adam = None if optimizer is None else adam_moments(self, optimizer)
        frozen = {n: b.detach().to("cpu", torch.float32).numpy() for n, b in self.frozen_buffers().items()}
        save_checkpoint(
            os.fspath(path),
            self.config,
            self.state_numpy(),
            frozen=frozen,
            data=data,
            options=options,
            step=step,
            model_seed=model_seed,
            metrics=metrics,
            adam=adam,
        )


def adam_moments(
    model: nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """An AdamW's ``(m, v, t)`` by parameter name (zeros for parameters it has not stepped)."""
    m, v, t = {}, {}, 0
    for name, p in model.named_parameters():
        st = optimizer.state.get(p, {})
        if "exp_avg" in st:
            m[name] = st["exp_avg"].detach().to("cpu", torch.float32).numpy()
            v[name] = st["exp_avg_sq"].detach().to("cpu", torch.float32).numpy()
            t = int(float(st["step"]))
        else:
            m[name] = np.zeros(tuple(p.shape), np.float32)
            v[name] = np.zeros(tuple(p.shape), np.float32)
    return m, v, t


__all__ = ["GPT", "Block", "MLP", "adam_moments"]
