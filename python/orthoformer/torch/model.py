"""The Orthoformer GPT as a PyTorch ``nn.Module``, the same function as the library's
``model::Gpt`` (``src/model/gpt*.rs``):

    x = drop(wte[idx] + wpe[:T])                 (no wpe with rotary positions)
    pre-LN block:  x = x + drop(attn(ln1(x)));  x = x + drop(mlp(ln2(x)))
    post-LN block: x = ln1(x + drop(attn(x)));  x = ln2(x + drop(mlp(x)))
    logits = ln_f(x) @ wteᵀ                      (head tied to the token embedding)

with LayerNorm ε = 1e-5 (β only with ``norm_bias``), GELU in GPT-2's tanh form or exact
(``gelu``), ``mlp = proj(gelu(fc(x)))``, dropout on the embedding output, each residual
branch and the softmax probabilities, biases as the config says. Parameter names are the
library's tensor names (``wte``, ``h.0.attn.q.weight``, ...), so checkpoints map one to one.
Attention is :class:`~orthoformer.torch.attention.OrthogonalAttention`, whose frozen
``W_Q, W_K`` are non-persistent buffers regenerated from the config's ``(frozen_method,
frozen_seed)`` and the layer: ``state_dict``, optimizers and DDP carry only trained tensors
(checkpoint folders still store the frozen values whole). Initialisation is the library's:
``GPT(config, seed)`` starts from the weights ``orthoformer train --model-seed SEED`` does,
built on the meta device and written tensor by tensor where the model will run
(``device=``, ``dtype=``), so the host never holds a second copy. Dropout masks come from
PyTorch's generator (same sites and rate, not the same bits). The output head runs over the
vocabulary padded to a multiple of ``pad_vocab`` (64 by default, as nanoGPT's 50304): zero
rows added to ``wte`` in the forward pass only, their logits ``-inf``, so tensor-core
matmuls get aligned shapes while ``wte``, the loss and the logits returned keep the true
vocabulary (no padded row is ever stored, trained or handed to the library).
"""

from __future__ import annotations

import os
from os import PathLike
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import _native
from ..checkpoint import load_checkpoint, save_checkpoint
from ..config import GPTConfig
from ..data import Data
from ..model import FrozenTensor, RustGPT, f32, frozen_tensors, unflatten
from ..validate import integer
from . import generate as _generate
from . import gpt2_io
from .attention import KVCache, OrthogonalAttention
from .frozen import FrozenOrthogonalLinear, FrozenProjection
from .loss import lm_loss
from .functional import Device

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

    def __init__(self, cfg: GPTConfig, layer: int) -> None:
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=LN_EPS, bias=cfg.norm_bias)
        self.attn = OrthogonalAttention.from_config(cfg, layer)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=LN_EPS, bias=cfg.norm_bias)
        self.mlp = MLP(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, cache: Optional[KVCache] = None) -> torch.Tensor:
        if self.pre:
            x = x + self.drop(self.attn(self.ln1(x), cache))
            return x + self.drop(self.mlp(self.ln2(x)))
        x = self.ln1(x + self.drop(self.attn(x, cache)))
        return self.ln2(x + self.drop(self.mlp(x)))


class GPT(nn.Module):
    """The GPT language model. ``GPT(config, seed)`` builds ``config`` (a :class:`GPTConfig`
    or a preset name) with the library's initialisation from ``seed``, directly on ``device``
    (default: the CPU) in ``dtype`` (default float32): built on the meta device, then every
    tensor allocated there and written one at a time (values drawn on the host in pieces of
    :data:`INIT_PIECE` floats), frozen matrices regenerated from the config's seed."""

    #: Floats of one initial-value piece drawn on the host (4 MiB; it passes a few buffers).
    INIT_PIECE = 1 << 20

    def __init__(
        self,
        config: Union[GPTConfig, str],
        seed: int = 0,
        *,
        device: Device = None,
        dtype: Optional[torch.dtype] = None,
        pad_vocab: int = 64,
        _rust: Optional[RustGPT] = None,
    ) -> None:
        super().__init__()
        cfg = GPTConfig.preset(config) if isinstance(config, str) else config.validate()
        self.config = cfg
        self.pad_vocab = integer("pad_vocab", pad_vocab, lo=1, hi=1 << 16)
        self._materialize(device, dtype)
        if self.wte.is_meta:
            return  # shapes only: allocate with to_empty, then init_weights
        if _rust is not None:
            self.load_flat(f32(_rust._m.params()), _rust.table)
            self.adopt_frozen(_rust.frozen())
        else:
            self.init_weights(seed)

    @classmethod
    def from_parts(
        cls,
        config: GPTConfig,
        frozen_rows: list,
        table: list,
        flat: Union[bytes, bytearray],
        *,
        device: Device = None,
        dtype: Optional[torch.dtype] = None,
    ) -> GPT:
        """A model from the native module's pieces: frozen rows, tensor table and flat
        parameters (what a training ``Session`` hands over)."""
        model = cls.__new__(cls)
        nn.Module.__init__(model)
        model.config = config.validate()
        model.pad_vocab = 64
        model._materialize(device, dtype)
        model.load_flat(f32(flat), table)
        model.adopt_frozen(frozen_tensors(frozen_rows))
        return model

    def _materialize(self, device: Device, dtype: Optional[torch.dtype]) -> None:
        """Builds every module on the meta device, then allocates it (uninitialised) on
        ``device`` in ``dtype`` and regenerates the frozen matrices there."""
        cfg = self.config
        with torch.device("meta"):
            c = cfg.d_model
            self.wte = nn.Parameter(torch.empty(cfg.vocab_size, c))
            # Rotary positions act inside attention: no position embedding then.
            self.wpe = nn.Parameter(torch.empty(cfg.context, c)) if cfg.position == "learned" else None
            self.drop = nn.Dropout(cfg.dropout)
            self.h = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layer))
            self.ln_f = nn.LayerNorm(c, eps=LN_EPS, bias=cfg.norm_bias)
            if dtype is not None:
                self.to(dtype)
        # The frozen projections regenerate themselves when `to_empty` allocates them.
        self.to_empty(device=torch.device("cpu") if device is None else device)
        self._ignore_frozen_in_ddp()

    def init_weights(self, seed: int = 0) -> None:
        """Writes the library's initial values from ``seed`` (``Gpt::new``'s, tensor by tensor
        in pieces) into every parameter, and regenerates the frozen matrices: what
        ``GPT(config, seed)`` does, and what a model built with ``device="meta"`` needs after
        ``to_empty``."""
        for block in self.h:
            block.attn.reset_frozen()
        draws = _native.InitDraws(self.config.to_json(), int(seed))
        params = dict(self.named_parameters())
        written = set()
        with torch.no_grad():
            while (nxt := draws.next_tensor()) is not None:
                name, _ = nxt
                flat = params[name].view(-1)
                for start in range(0, flat.numel(), self.INIT_PIECE):
                    piece = draws.draw(self.INIT_PIECE)
                    src = torch.frombuffer(piece, dtype=torch.float32)
                    flat[start : start + src.numel()].copy_(src)
                written.add(name)
        missing = sorted(set(params) - written)
        if missing:
            raise ValueError(f"internal: the library drew no initial values for {missing}")

    def adopt_frozen(self, frozen: dict[str, FrozenTensor]) -> None:
        """Takes frozen matrices handed over by the library (a checkpoint, a session): those
        equal to what the modules regenerate stay regenerable; others (imported, rotated) are
        stored whole in a dense projection."""
        for name, ft in frozen.items():
            layer, which = int(name.split(".")[1]), name.split(".")[3]
            attn = self.h[layer].attn
            mod = getattr(attn, which, None)
            if not isinstance(mod, FrozenProjection):
                raise ValueError(f"{name} is not a frozen tensor of this model")
            if hasattr(mod, "set_transform_") and ft.signs is None and not mod.pinned:
                # Dense values of a Hadamard projection (a GPT-2 folder): the same matrix?
                if np.array_equal(mod.weight.float().cpu().numpy(), ft.value):
                    continue
            if hasattr(mod, "set_transform_") and ft.signs is not None and ft.perm is not None:
                if torch.equal(mod.signs.cpu(), torch.from_numpy(ft.signs.copy()).to(mod.signs.dtype)) and (
                    torch.equal(mod.perm.cpu(), torch.from_numpy(ft.perm))
                ):
                    continue
                mod.set_transform_(ft.signs, ft.perm)
                continue
            if hasattr(mod, "regenerated") and not mod.pinned:
                w = mod.weight.detach()
                # float32 already holds the regenerated values; other dtypes rounded them.
                mine = w.cpu() if w.dtype == torch.float32 else mod.regenerated()
                if np.array_equal(mine.numpy(), ft.value):
                    continue
            # Stored whole: a dense projection holding the given values.
            dense = FrozenOrthogonalLinear(
                self.config.d_model,
                self.config.n_head,
                bias=mod.bias is not None,
                seed=0,
                seed_in_state_dict=False,
                device=mod.bias.device if mod.bias is not None else attn.v.weight.device,
                dtype=attn.v.weight.dtype,
            ).set_weight_(torch.from_numpy(ft.value.copy()))
            if mod.bias is not None:
                dense.bias = mod.bias
            setattr(attn, which, dense)
        self._ignore_frozen_in_ddp()

    def _ignore_frozen_in_ddp(self) -> None:
        # DDP wrappers of this model leave the frozen buffers alone: every rank regenerates
        # (or loads) the same values, so nothing is broadcast at wrapping or per step.
        self._ddp_params_and_buffers_to_ignore = [n for n, _ in self.named_buffers()]

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
        """The frozen projections by the library's name (``h.{l}.attn.{q,k}.weight``) as dense
        matrices (computed for the Hadamard ones)."""
        return {
            f"h.{layer}.attn.{w}.weight": m.weight
            for layer, block in enumerate(self.h)
            for w, m in block.attn.frozen_modules().items()
        }

    def frozen_pinned(self) -> bool:
        """Whether some frozen matrix is stored whole (not regenerable from the config's seed)."""
        return any(m.pinned for block in self.h for m in block.attn.frozen_modules().values())

    def forward(
        self,
        idx: torch.Tensor,
        targets: Optional[torch.Tensor] = None,
        *,
        labels: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Logits ``(B, T, V)`` of token ids ``idx`` ``(B, T)`` and the mean cross-entropy
        against ``targets`` (the next tokens, already shifted: nanoGPT's convention) or
        ``labels`` (the input ids, shifted here: Hugging Face's, ``model(idx, labels=idx)``);
        ``-100`` is ignored in both, and passing both is refused (:mod:`.loss`)."""
        b, t = idx.shape
        if t > self.config.context:
            raise ValueError(f"sequence length {t} exceeds the model's context {self.config.context}")
        x = self.embed(idx)
        for block in self.h:
            x = block(x)
        logits = self.head(self.ln_f(x))
        v = self.config.vocab_size
        # The padded columns are -inf: no probability, no gradient, the same loss.
        return logits[..., :v], lm_loss(logits, targets, labels)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """The tied output head over the vocabulary padded to a multiple of ``pad_vocab``:
        ``(..., C) -> (..., V')``, the padded columns ``-inf`` (the caller cuts them off)."""
        v = self.config.vocab_size
        extra = -v % getattr(self, "pad_vocab", 1)
        if not extra:
            return F.linear(x, self.wte)
        # Padded in the graph (fused with autocast's cast when compiled): the parameter, its
        # gradient and every external view keep the true vocabulary.
        w = F.pad(self.wte, (0, 0, 0, extra))
        mask = torch.zeros(v + extra, dtype=w.dtype, device=w.device)
        mask[v:] = float("-inf")
        return F.linear(x, w, mask)

    def embed(self, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """The blocks' input for token ids ``idx`` ``(B, T)`` at positions ``start ..
        start + T``: token embeddings, plus the position embeddings when learned, dropped out."""
        x = self.wte[idx]
        if self.wpe is not None:
            x = x + self.wpe[start : start + idx.shape[1]]
        return self.drop(x)

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
        return cls(ckpt.config, _rust=ckpt.model, device=device)

    @classmethod
    def from_hf(
        cls,
        folder: Union[str, PathLike[str]],
        *,
        attention: Optional[str] = None,
        frozen_seed: Optional[int] = None,
        frozen_method: Optional[str] = None,
        device: Device = None,
        dtype: Optional[torch.dtype] = None,
    ) -> GPT:
        """The GPT-2 of a local Hugging Face folder (``config.json`` and ``model.safetensors``
        or ``pytorch_model.bin``) as this model: ``softmax`` by default, or with its Q/K
        replaced by frozen matrices of ``attention`` (``orthogonal``, ...) drawn from
        ``frozen_seed`` and ``frozen_method``; a folder written by :meth:`to_hf` or
        ``orthoformer export`` comes back with its frozen Q/K (see
        :mod:`orthoformer.torch.gpt2_io`)."""
        return gpt2_io.from_hf(
            cls,
            folder,
            attention=attention,
            frozen_seed=frozen_seed,
            frozen_method=frozen_method,
            device=device,
            dtype=dtype,
        )

    def to_hf(self, folder: Union[str, PathLike[str]]) -> None:
        """Writes this model as a Hugging Face GPT-2 folder, frozen matrices marked in
        ``config.json`` (pre-LN softmax-kernel models only)."""
        gpt2_io.to_hf(self, folder)

    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        *,
        generator: Optional[torch.Generator] = None,
    ) -> torch.Tensor:
        """``idx`` ``(B, T)`` followed by ``max_new_tokens`` sampled tokens: greedy at
        ``temperature=0``, else sampled (``top_k``, ``top_p``) from ``generator``; a
        key/value cache for the softmax-kernel variants (:mod:`orthoformer.torch.generate`)."""
        return _generate.generate(self, idx, max_new_tokens, temperature, top_k, top_p, generator=generator)

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
        # Regenerable frozen matrices are the library's own: it regenerates and stores them.
        frozen = None
        if self.frozen_pinned():
            frozen = {
                n: b.detach().to("cpu", torch.float32).numpy() for n, b in self.frozen_buffers().items()
            }
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
