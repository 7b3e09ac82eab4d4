"""A Llama-style language model with orthogonal attention: :class:`Llama` (token embedding,
pre-norm blocks of RMSNorm, :class:`~orthoformer.torch.attention.OrthogonalAttention` with
rotary positions and grouped-query heads, RMSNorm, SwiGLU MLP ``down(silu(gate(x)) ·
up(x))``, a final RMSNorm and a tied or untied head), shaped by
:class:`~orthoformer.torch.llama_config.LlamaConfig`.

:meth:`Llama.from_hf` loads a local ``transformers`` Llama or Qwen2 folder (``config.json``
and ``model.safetensors``, or shards with ``model.safetensors.index.json``): with ``softmax``
attention it is that model, to float rounding; a frozen variant replaces ``W_Q``/``W_K`` by
the library's frozen matrices of layer ``l`` (tensors ``2l``, ``2l + 1`` from
``frozen_seed``; ``W_K`` with ``num_key_value_heads`` heads), exactly as
:func:`~orthoformer.torch.freeze_qk_` freezes a ``transformers`` Llama: Q/K biases (Qwen2's,
a Llama's ``attention_bias``) stay trainable and start at zero, since a bias trained for the
replaced matrix means nothing to the frozen one. :meth:`Llama.to_hf` writes a folder
``LlamaForCausalLM`` (or ``Qwen2ForCausalLM``) loads, frozen matrices as weights (identity
queries as the identity, tied keys as a copy of the queries, their bias included) and the
marker ``"orthoformer": {attention, frozen_method, frozen_seed}`` in ``config.json``, which
``from_hf`` and ``freeze_qk_`` read to freeze them again (stored Q/K values and biases kept).
RoPE pairs dimension ``i`` with ``i + D/2`` (``transformers``' ``rotate_half``), so Q/K
weights load unpermuted.

:meth:`Llama.generate` decodes with a key/value cache per layer (:mod:`.generate`): the
prompt runs once, then each new token at its own position (RoPE continues from the cache's
length); greedy decoding gives ``transformers``' ``generate(do_sample=False)`` tokens. A
request past ``max_position_embeddings`` is refused before anything runs.
"""

from __future__ import annotations

import json
import os
import pathlib
from os import PathLike
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ATTENTIONS
from ..validate import InputError
from . import generate as _generate
from .attention import LINEAR_VARIANTS, KVCache, OrthogonalAttention
from .frozen import FrozenOrthogonalLinear, FrozenProjection
from .functional import Device
from .hf import read_marker
from .llama_config import LlamaConfig
from .loss import lm_loss
from .masking import check_attention_mask

PathArg = Union[str, "PathLike[str]"]
#: The key of the frozen-attention marker in ``config.json`` (as :mod:`.hf` writes it).
MARKER = "orthoformer"
#: The variants a Llama folder's marker names (:meth:`Llama.to_hf` marks every one but softmax).
MARKED_ATTENTIONS = tuple(a for a in ATTENTIONS if a not in ("softmax", "orthogonal-trained"))
#: Standard deviation of the initial weights (``transformers``' ``initializer_range``).
INIT_STD = 0.02
#: Our attention's module names and ``transformers``' (parameter names differ only there).
_ATTN_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}


class RMSNorm(nn.Module):
    """``x / √(mean(x²) + ε) · w`` over the last dimension, computed in float32 and rounded
    back before the weight, as ``transformers``' ``LlamaRMSNorm``."""

    def __init__(self, dim: int, eps: float, *, device: Device = None, dtype: Optional[torch.dtype] = None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) · up(x))`` ``(B, T, C) -> (B, T, C)``, bias-free."""

    def __init__(self, c: int, f: int, **kw: Any) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(c, f, bias=False, **kw)
        self.up_proj = nn.Linear(c, f, bias=False, **kw)
        self.down_proj = nn.Linear(f, c, bias=False, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    """``x += attn(norm(x)); x += mlp(norm(x))`` for layer ``layer``."""

    def __init__(self, cfg: LlamaConfig, layer: int, **kw: Any) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **kw)
        self.self_attn = OrthogonalAttention(
            cfg.hidden_size,
            cfg.num_attention_heads,
            variant=cfg.attention,
            method=cfg.frozen_method,
            seed=cfg.frozen_seed,
            dropout=cfg.attention_dropout,
            layer=layer,
            seed_in_state_dict=False,
            rope=True,
            rope_theta=cfg.rope_theta,
            num_kv_heads=cfg.num_key_value_heads,
            bias=cfg.qkv_bias,
            out_bias=cfg.o_bias,
            **kw,
        )
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **kw)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size, **kw)

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: Optional[torch.Tensor] = None,
        doc_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        *,
        cache: Optional[KVCache] = None,
    ) -> torch.Tensor:
        """``x`` ``(B, T, C)`` through the block; with ``cache``, ``x`` holds the positions
        after the cached ones (see :meth:`OrthogonalAttention.forward`)."""
        h = self.input_layernorm(x)
        x = x + self.self_attn(h, cache, attn_mask=attn_mask, doc_ids=doc_ids, attention_mask=attention_mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """A Llama-style causal language model of ``config`` (a :class:`LlamaConfig`), built on
    ``device`` in ``dtype``; trainable weights start ``N(0, 0.02²)``, biases at zero, norms
    at one, frozen matrices drawn from ``config.frozen_seed`` (on ``meta`` nothing is drawn
    until :meth:`reset_frozen`). Parameter names are ``transformers``' without the ``model.``
    prefix, except attention's ``q``, ``k``, ``v``, ``o`` (``q_proj`` ...)."""

    def __init__(self, config: LlamaConfig, *, device: Device = None, dtype: Optional[torch.dtype] = None):
        super().__init__()
        if not isinstance(config, LlamaConfig):
            raise InputError(f"Llama takes a LlamaConfig, not {type(config).__name__}")
        self.config = config.validate()
        kw: dict[str, Any] = {"device": device, "dtype": dtype}
        c = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, c, **kw)
        n = config.num_hidden_layers
        self.layers = nn.ModuleList(LlamaBlock(config, layer, **kw) for layer in range(n))
        self.norm = RMSNorm(c, config.rms_norm_eps, **kw)
        v = config.vocab_size
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(c, v, bias=False, **kw)
        if torch.device(device or "cpu").type != "meta":
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draws the trainable weights as ``transformers`` initialises a Llama (``N(0,
        0.02²)``, biases at zero, norms at one) from torch's generator."""
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    m.weight.normal_(0.0, INIT_STD)
                if isinstance(m, (nn.Linear, FrozenProjection)) and m.bias is not None:
                    m.bias.zero_()
                if isinstance(m, RMSNorm):
                    m.weight.fill_(1.0)
                elif isinstance(m, OrthogonalAttention):
                    m.reset_parameters()

    def reset_frozen(self) -> None:
        """Regenerates every frozen matrix from the seed (after ``to_empty``)."""
        for layer in self.layers:
            layer.self_attn.reset_frozen()

    @property
    def head_weight(self) -> torch.Tensor:
        """The head ``(V, C)``: the embedding when tied."""
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(
        self,
        idx: torch.Tensor,
        targets: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
        doc_ids: Optional[torch.Tensor] = None,
        *,
        labels: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Logits ``(B, T, V)`` of token ids ``idx`` ``(B, T)`` and the mean cross-entropy
        against ``targets`` ``(B, T)`` (the next token of each position, already shifted:
        nanoGPT's convention) or ``labels`` ``(B, T)`` (the input ids, shifted here: Hugging
        Face's, ``model(idx, labels=idx)``); ``-100`` is ignored in both, and passing both is
        refused (:mod:`.loss`). ``attention_mask`` ``(B, T)`` (1 or ``True`` for a token, 0
        for padding: a tokenizer's) hides the padding keys; ``attn_mask`` and ``doc_ids`` mask
        attention beyond causal (see :meth:`OrthogonalAttention.forward`)."""
        if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.dtype.is_floating_point:
            raise InputError(f"idx must be a (B, T) tensor of token ids, got {getattr(idx, 'shape', idx)!r}")
        if attention_mask is not None:  # checked once (a 0/1 check reads the device), not per layer
            attention_mask = check_attention_mask(attention_mask, *idx.shape)
        x = self.embed_tokens(idx)  # (B, T, C)
        for layer in self.layers:
            x = layer(x, attn_mask, doc_ids, attention_mask)
        logits = F.linear(self.norm(x), self.head_weight)  # (B, T, V)
        return logits, lm_loss(logits, targets, labels)

    def cached_logits(self, idx: torch.Tensor, caches: list[KVCache], start: int) -> torch.Tensor:
        """Logits ``(B, V)`` of the last position of ``idx`` ``(B, T)``, which sit at positions
        ``start .. start + T`` right after what ``caches`` (one per layer) hold; the caches
        are extended. ``start`` must be the caches' length: RoPE turns each new query and
        key by its position."""
        if len(caches) != len(self.layers) or any(c.length != start for c in caches):
            held = sorted({c.length for c in caches})
            raise InputError(
                f"cached_logits needs {len(self.layers)} caches holding {start} positions, got "
                f"{len(caches)} holding {held}: pass the caches of the earlier calls"
            )
        if self.config.attention in LINEAR_VARIANTS:
            raise InputError(f"{self.config.attention} attention keeps no key/value cache: call the model")
        x = self.embed_tokens(idx)  # (B, T, C)
        for layer, cache in zip(self.layers, caches):
            x = layer(x, cache=cache)
        return F.linear(self.norm(x[:, -1]), self.head_weight)

    @torch.no_grad()
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
        """``idx`` ``(B, T)`` followed by ``max_new_tokens`` tokens: greedy at
        ``temperature=0`` (``transformers``' ``generate(do_sample=False)``, without stopping
        at an end-of-sequence token), else sampled (``top_k``, ``top_p``) from ``generator``
        (:func:`~orthoformer.torch.generate.sample`). The prompt runs once, then every token
        through a key/value cache per layer (linear-attention variants run the whole
        sequence again per token). Rows are whole prompts of one length (no padding). The
        prompt and the new tokens must fit in ``max_position_embeddings``; more is refused
        before anything runs (positions the model was not trained for; crop the prompt to
        go on)."""
        _generate.check_request(idx, max_new_tokens)
        limit = self.config.max_position_embeddings
        t = idx.shape[1]
        if t + max_new_tokens > limit:
            raise InputError(
                f"a prompt of {t} tokens and max_new_tokens {max_new_tokens} need "
                f"{t + max_new_tokens} positions, more than max_position_embeddings {limit}: "
                "shorten the prompt or ask for fewer tokens"
            )
        cache = self.config.attention not in LINEAR_VARIANTS
        return _generate.decode(
            self,
            idx,
            max_new_tokens,
            temperature,
            top_k,
            top_p,
            generator,
            context=limit,
            layers=len(self.layers),
            cache=cache,
        )

    @classmethod
    def from_hf(
        cls,
        folder: PathArg,
        *,
        attention: Optional[str] = None,
        frozen_seed: Optional[int] = None,
        frozen_method: Optional[str] = None,
        device: Device = None,
        dtype: Optional[torch.dtype] = None,
    ) -> Llama:
        """A local ``transformers`` Llama or Qwen2 folder as this model. ``attention``
        ``None``: the folder marker's variant when it has one (its stored Q/K and their biases
        frozen as they are), else ``softmax`` (Q/K trainable, loaded); a frozen variant
        replaces Q/K by the matrices of ``frozen_seed`` (default 0) and ``frozen_method``
        (default ``qr``), their biases (if any) trainable from zero as :func:`freeze_qk_`
        starts them."""
        from .llama_io import load_into, read_folder

        hf, tensors = read_folder(pathlib.Path(os.fspath(folder)))
        asked = attention is not None or frozen_seed is not None or frozen_method is not None
        marker = None if asked else hf.get(MARKER)
        if marker is not None:
            # Every field of the marker named and checked, as GPT.from_hf checks it.
            attention, frozen_method, frozen_seed = read_marker(marker, MARKED_ATTENTIONS)
        cfg = LlamaConfig.from_hf_dict(
            hf,
            attention=attention or "softmax",
            frozen_seed=0 if frozen_seed is None else frozen_seed,
            frozen_method=frozen_method or "qr",
        )
        model = cls(cfg, device="meta", dtype=dtype)
        model.to_empty(device=torch.device("cpu") if device is None else device)
        model.reset_frozen()
        load_into(model, tensors, restore=marker is not None)
        return model

    @classmethod
    def from_checkpoint(cls, folder: PathArg, device: Device = None) -> Llama:
        """The model of a checkpoint folder ``python -m orthoformer.train --arch llama`` wrote
        (:mod:`.llama_run`: every file's SHA-256 checked, frozen Q/K regenerated from the
        recorded seed), on ``device``."""
        from .llama_run import load

        return load(folder, device)[0]

    def to_hf(self, folder: PathArg) -> None:
        """Writes this model as a ``transformers`` Llama (or Qwen2) folder (``config.json``,
        ``model.safetensors``); frozen, identity and tied Q/K as dense weights, marked in
        ``config.json`` when the variant is not ``softmax``."""
        from .llama_io import write_folder

        write_folder(self, pathlib.Path(os.fspath(folder)))

    def config_json(self) -> str:
        """The ``config.json`` :meth:`to_hf` writes."""
        cfg = self.config
        hf = cfg.to_hf_dict()
        hf["torch_dtype"] = str(self.embed_tokens.weight.dtype).removeprefix("torch.")
        if cfg.attention != "softmax":  # W_Q or W_K is not trained: frozen, tied or the identity
            hf[MARKER] = {
                "attention": cfg.attention,
                "frozen_method": cfg.frozen_method,
                "frozen_seed": cfg.frozen_seed,
            }
        return json.dumps(hf, indent=2) + "\n"


def hf_name(ours: str) -> str:
    """``transformers``' name of one of our parameters (``layers.0.self_attn.q.weight`` ->
    ``model.layers.0.self_attn.q_proj.weight``)."""
    if ours.startswith("lm_head."):
        return ours
    parts = ours.split(".")
    if len(parts) > 3 and parts[2] == "self_attn" and parts[3] in _ATTN_NAMES:
        parts[3] = _ATTN_NAMES[parts[3]]
    return "model." + ".".join(parts)


def dense_qk(attn: OrthogonalAttention, which: str) -> torch.Tensor:
    """The dense ``W_Q`` or ``W_K`` ``(out, C)`` of ``attn``: trainable or frozen weights,
    the identity for identity queries, the queries' matrix for tied keys."""
    mod = getattr(attn, which)
    if mod is not None:
        return mod.weight
    if which == "q":
        return torch.eye(attn.d_model, device=attn.v.weight.device, dtype=attn.v.weight.dtype)
    return dense_qk(attn, "q")


def dense_bias(attn: OrthogonalAttention, which: str) -> Optional[torch.Tensor]:
    """The bias of ``W_Q`` or ``W_K`` (``None`` without one): the queries' for tied keys."""
    mod = getattr(attn, which)
    if mod is None:
        return None if which == "q" else dense_bias(attn, "q")
    return mod.bias


def pin_frozen(attn: OrthogonalAttention, which: str, value: torch.Tensor) -> None:
    """Keeps stored frozen values: unchanged when they are what the seed regenerates, else
    stored whole in a dense frozen projection (the loaded bias moved over)."""
    mod = getattr(attn, which)
    if torch.equal(mod.weight.detach().float().cpu(), value.float().cpu()):
        return
    heads = attn.n_head if which == "q" else attn.n_kv_head
    w = attn.v.weight
    bias = mod.bias is not None
    dense = FrozenOrthogonalLinear(
        attn.d_model,
        heads,
        attn.d_head,
        bias=bias,
        seed=0,
        seed_in_state_dict=False,
        device=w.device,
        dtype=w.dtype,
    )
    if bias:
        with torch.no_grad():
            dense.bias.copy_(mod.bias)
    setattr(attn, which, dense.set_weight_(value))


__all__ = ["Llama", "LlamaBlock", "LlamaConfig", "RMSNorm", "SwiGLU", "dense_bias", "dense_qk", "hf_name"]
