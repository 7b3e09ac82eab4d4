"""SpinQuant's learned rotations (Liu et al. 2024) for a pretrained Llama folder: the residual
rotation R1 (``C x C``) and one value-head rotation R2 per layer (``D x D``) are optimised on
calibration text by Cayley descent (:mod:`.cayley`), the objective the cross-entropy of the
model whose seven linears per layer are rounded to ``bits`` in groups of ``group`` inputs
(asymmetric min/max or symmetric, the rounding passed straight through). Both rotations are then folded
into the weights, so the model computes exactly what it computed before (checked) and the
folder runs unchanged in any tool (``orthoformer quantize --model`` writes the GGUF
llama.cpp runs). The starting point is the folder's own basis: pass a folder rotated by
``orthoformer rotate`` (QuaRot's Hadamard R1, R2 with ``--rotate-heads``) to start from
QuaRot, as SpinQuant does.

The RMSNorm weights are folded into the linears that read them first (the head is then
untied), because a rotation commutes with an RMSNorm of unit weight only."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch.func import functional_call

from .cayley import cayley_step, orthogonality_error
from .llama import Llama, hf_name
from .llama_config import LlamaConfig

#: The linears of one layer, ``transformers``' names under ``model.layers.{i}.``.
LINEARS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)

Tensors = dict[str, torch.Tensor]


def folded(t: Tensors, cfg: LlamaConfig) -> Tensors:
    """The weights (float64) with every RMSNorm weight folded into the linears it feeds
    (q/k/v, gate/up, the head) and set to one; the head its own tensor (untied)."""
    w = {k: v.double() for k, v in t.items()}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        for norm, readers in (("input_layernorm", LINEARS[:3]), ("post_attention_layernorm", LINEARS[4:6])):
            g = w[f"{p}{norm}.weight"]
            for r in readers:
                w[f"{p}{r}.weight"] = w[f"{p}{r}.weight"] * g
            w[f"{p}{norm}.weight"] = torch.ones_like(g)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    w["lm_head.weight"] = head * w["model.norm.weight"]
    w["model.norm.weight"] = torch.ones_like(w["model.norm.weight"])
    return w


def rotated_layer(w: Tensors, r1: torch.Tensor, r2: torch.Tensor, cfg: LlamaConfig, i: int) -> Tensors:
    """Layer ``i``'s seven linears of ``w`` (folded; ``transformers``' names without
    ``model.layers.{i}.``) with the residual stream rotated by ``r1`` and the value heads by
    ``r2`` (undone inside ``o_proj``), in ``r1``'s dtype and differentiable in both."""
    dt, c = r1.dtype, cfg.hidden_size
    d, kv = cfg.head_dim, cfg.num_key_value_heads or cfg.num_attention_heads

    def get(name: str) -> torch.Tensor:
        return w[f"model.layers.{i}.{name}.weight"].to(dt)

    out = {
        f"{n}.weight": get(n) @ r1
        for n in ("self_attn.q_proj", "self_attn.k_proj", "mlp.gate_proj", "mlp.up_proj")
    }
    # Value head h: R2ᵀ W_h R1; o_proj's columns of head h: R1ᵀ W_h R2.
    v = torch.einsum("ij,hic->hjc", r2, get("self_attn.v_proj").reshape(kv, d, c))
    out["self_attn.v_proj.weight"] = v.reshape(kv * d, c) @ r1
    o = get("self_attn.o_proj").reshape(c, -1, d) @ r2
    out["self_attn.o_proj.weight"] = r1.T @ o.reshape(c, -1)
    out["mlp.down_proj.weight"] = r1.T @ get("mlp.down_proj")
    return out


def rotated(w: Tensors, r1: torch.Tensor, r2: torch.Tensor, cfg: LlamaConfig) -> Tensors:
    """Every tensor of ``w`` (folded) with the residual stream rotated by ``r1`` and layer
    ``i``'s value heads by ``r2[i]``: the model computes what ``w`` computes."""
    dt = r1.dtype
    out = {k: v.to(dt) for k, v in w.items() if "norm" in k}
    for k in ("model.embed_tokens.weight", "lm_head.weight"):
        out[k] = w[k].to(dt) @ r1
    for i in range(cfg.num_hidden_layers):
        out.update({f"model.layers.{i}.{k}": v for k, v in rotated_layer(w, r1, r2[i], cfg, i).items()})
    return out


def _round(x: torch.Tensor) -> torch.Tensor:
    """``round(x)`` whose gradient is the identity's (straight through)."""
    return x + (x.round() - x).detach()


def fake_quant(w: torch.Tensor, bits: int, group: int, symmetric: bool = False) -> torch.Tensor:
    """``w`` ``(out, in)`` rounded to ``bits`` per group of ``group`` inputs: on an
    asymmetric min/max grid (Q4_1's form; the K-quants refine it) or a symmetric one (Q4_0's
    and Q5_0's: ``-2^(b-1) .. 2^(b-1) - 1`` steps of ``max |w| / 2^(b-1)``), the rounding's
    gradient passed straight through while the grid's scale and offset stay differentiable."""
    o, i = w.shape
    g = w.reshape(o, i // group, group)
    if symmetric:
        half = 2 ** (bits - 1)
        scale = (g.abs().amax(-1, keepdim=True) / half).clamp_min(1e-12)
        return (_round(g / scale).clamp(-half, half - 1) * scale).reshape(o, i)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    scale = ((hi - lo) / (2**bits - 1)).clamp_min(1e-12)
    q = _round((g - lo) / scale).clamp(0, 2**bits - 1)
    return (q * scale + lo).reshape(o, i)


@dataclasses.dataclass
class Settings:
    """How the rotations are learned."""

    steps: int = 60
    lr: float = 1.0
    batch: int = 4
    bits: int = 4
    group: int = 32
    symmetric: bool = False
    holdout: float = 0.25
    seed: int = 0


class Objective:
    """The quantised model's cross-entropy as a function of ``(r1, r2)`` on windows of token
    ids: each :class:`~.llama.LlamaBlock` of a :class:`~.llama.Llama` runs the rotated,
    rounded weights in place of its own (``torch.func.functional_call``). The embedding and
    the head are not rounded, so their rotation is applied to the activations instead (the
    same products, without rotating two vocabulary-sized matrices every step)."""

    def __init__(self, cfg: LlamaConfig, base: Tensors, settings: Settings) -> None:
        self.cfg = dataclasses.replace(cfg, tie_word_embeddings=False)
        torch.manual_seed(0)
        self.model = Llama(self.cfg).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        # float32 once: each step's rotation reads these, in the dtype it runs in.
        self.base = {k: v.float() for k, v in base.items()}
        ours = {hf_name(n).removeprefix("model.layers.0."): n.removeprefix("layers.0.")
                for n, _ in self.model.layers[0].named_parameters(prefix="layers.0")}  # fmt: skip
        self.local = ours
        self.s = settings

    def weights(self, r1: torch.Tensor, r2: torch.Tensor, quantise: bool) -> list[Tensors]:
        """Each layer's parameters (its modules' names) for ``(r1, r2)``, rounded when
        ``quantise``."""
        r1, r2 = r1.float(), r2.float()
        layers = []
        for i in range(self.cfg.num_hidden_layers):
            w = rotated_layer(self.base, r1, r2[i], self.cfg, i)
            if quantise:
                w = {k: fake_quant(v, self.s.bits, self.s.group, self.s.symmetric) for k, v in w.items()}
            for norm in ("input_layernorm", "post_attention_layernorm"):
                w[f"{norm}.weight"] = self.base[f"model.layers.{i}.{norm}.weight"]
            layers.append({self.local[k]: v for k, v in w.items()})
        return layers

    def loss_of(self, layers: list[Tensors], r1: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy of ``ids`` ``(B, T)`` with ``layers``' weights."""
        r1 = r1.float()
        x = F.embedding(ids[:, :-1], self.base["model.embed_tokens.weight"]) @ r1
        for layer, params in zip(self.model.layers, layers):
            x = functional_call(layer, params, (x,))
        # The final norm's weight is one (folded into the head): it commutes with R1.
        logits = F.linear(self.model.norm(x) @ r1.T, self.base["lm_head.weight"])
        return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())

    def loss(
        self, r1: torch.Tensor, r2: torch.Tensor, ids: torch.Tensor, quantise: bool = True
    ) -> torch.Tensor:
        """Mean next-token cross-entropy of ``ids`` ``(B, T)`` for ``(r1, r2)``."""
        return self.loss_of(self.weights(r1, r2, quantise), r1, ids)


def check_group(cfg: LlamaConfig, group: int) -> Optional[str]:
    """Why ``group`` does not divide every linear's inputs, or ``None``."""
    for name, n in (("hidden_size", cfg.hidden_size), ("intermediate_size", cfg.intermediate_size)):
        if n % group:
            return f"--group {group} does not divide {name} {n}"
    return None


def learn(
    cfg: LlamaConfig,
    base: Tensors,
    windows: torch.Tensor,
    settings: Settings,
    progress: Callable[[int, float], None] = lambda step, loss: None,
) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """R1 and R2 (float64, from the identity) learned on ``windows`` ``(N, T)`` by
    ``settings.steps`` Cayley steps on batches drawn (seeded) from the first ``N - H`` of
    them; the last ``H = N * settings.holdout`` (rounded down) are held out, to show whether
    the rotation learned the calibration text rather than the rounding (with a few thousand
    tokens it can: the rounded model's loss then falls below the unrounded one's). Returns
    both and the run's numbers: the rounded model's loss before and after on the training and
    the held-out windows, the unrounded loss on the held-out ones, and the time."""
    obj = Objective(cfg, base, settings)
    c, d, n = cfg.hidden_size, cfg.head_dim, cfg.num_hidden_layers
    r1 = torch.eye(c, dtype=torch.float64)
    r2 = torch.eye(d, dtype=torch.float64).repeat(n, 1, 1)
    gen = torch.Generator().manual_seed(settings.seed)
    held = int(len(windows) * settings.holdout)
    train, test = windows[: len(windows) - held], windows[len(windows) - held :]
    if len(train) == 0:
        raise ValueError("every calibration window is held out: lower the held-out share or give more text")

    def mean_loss(
        r1: torch.Tensor, r2: torch.Tensor, w: torch.Tensor, quantise: bool = True
    ) -> Optional[float]:
        if len(w) == 0:
            return None
        with torch.no_grad():
            layers = obj.weights(r1, r2, quantise)
            return sum(float(obj.loss_of(layers, r1, x)) * len(x) for x in w.split(settings.batch)) / len(w)

    t0 = time.perf_counter()
    before, before_held = mean_loss(r1, r2, train), mean_loss(r1, r2, test)
    losses = []
    for step in range(settings.steps):
        pick = torch.randint(len(train), (min(settings.batch, len(train)),), generator=gen)
        a = r1.clone().requires_grad_(True)
        b = r2.clone().requires_grad_(True)
        loss = obj.loss(a, b, train[pick])
        g1, g2 = torch.autograd.grad(loss, (a, b))
        value = float(loss.detach())
        if not math.isfinite(value):
            raise ValueError(f"step {step}: the loss is not finite ({value}); lower --lr")
        r1 = cayley_step(r1, g1, settings.lr)
        r2 = cayley_step(r2, g2, settings.lr)
        losses.append(value)
        progress(step + 1, value)
    report = {
        "calibration_windows": int(len(train)),
        "held_out_windows": int(len(test)),
        "window": int(windows.shape[1]),
        "quantised_loss_before": before,
        "quantised_loss_after": mean_loss(r1, r2, train),
        "held_out_quantised_loss_before": before_held,
        "held_out_quantised_loss_after": mean_loss(r1, r2, test),
        "held_out_unrounded_loss": mean_loss(r1, r2, test, quantise=False),
        "step_losses": losses,
        "orthogonality_error": max(orthogonality_error(r1), orthogonality_error(r2)),
        "seconds": time.perf_counter() - t0,
    }
    return r1, r2, report


__all__ = [
    "LINEARS",
    "Objective",
    "Settings",
    "check_group",
    "fake_quant",
    "folded",
    "learn",
    "rotated",
    "rotated_layer",
]
