"""The fine-tuning loop of ``python -m orthoformer.finetune`` (:mod:`orthoformer.finetune`,
which runs it from the command line, one mode per process): the modes, the shared batches and
validation windows, AdamW with warm-up and cosine decay, and the report of one mode."""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import TrainingStopped
from .torch.lora import LINEARS, add_lora_, check_lora, lora_deltas, owner_of, update_ranks
from .validate import integer, number
from .validate import seed as seed_check

#: The ways of fine-tuning, in the order they are reported.
MODES = ("full", "qk-pretrained", "qk-orthogonal", "lora")
#: The modes run when ``--modes`` is not given.
DEFAULT_MODES = ("full", "qk-pretrained", "qk-orthogonal")
#: LoRA's defaults: rank, alpha, and every linear of a decoder layer as a target.
LORA_RANK, LORA_ALPHA = 8, 16.0


def _need_transformers() -> Any:
    try:
        import transformers
    except ImportError as e:  # one clear line: the test extra installs it
        raise ImportError("orthoformer.finetune needs transformers: pip install transformers") from e
    return transformers


def prepare_mode_(
    model: Any,
    mode: str,
    *,
    seed: int = 0,
    lora_rank: int = LORA_RANK,
    lora_alpha: float = LORA_ALPHA,
    lora_targets: Sequence[str] = LINEARS,
) -> Any:
    """Sets ``model`` (a ``transformers`` Llama-family causal LM) up for ``mode`` in place:
    ``full`` changes nothing, ``qk-pretrained`` stops gradients to every ``q_proj``/``k_proj``
    weight, ``qk-orthogonal`` replaces them by frozen orthogonal matrices drawn from ``seed``
    (their biases, where a model has them, train), ``lora`` freezes everything and adds the
    low-rank updates (``A`` drawn from ``seed``). Returns ``model``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    layers = getattr(getattr(model, "model", model), "layers", None)
    if layers is None:
        raise ValueError("fine-tuning modes need a Llama-family model (model.model.layers)")
    if mode == "qk-pretrained":
        for block in layers:
            block.self_attn.q_proj.weight.requires_grad_(False)
            block.self_attn.k_proj.weight.requires_grad_(False)
    elif mode == "qk-orthogonal":
        from .torch import freeze_qk_

        freeze_qk_(model, "orthogonal", seed=seed)
    elif mode == "lora":
        add_lora_(model, lora_rank, lora_alpha, lora_targets, seed=seed)
    return model


def trainable_parameters(model: Any) -> int:
    """Values that receive gradients (tied tensors counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def split_tokens(ids: np.ndarray, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """The first ``1 - val_fraction`` of the tokens train, the rest validate."""
    cut = int(len(ids) * (1.0 - val_fraction))
    return ids[:cut], ids[cut:]


def val_windows(val: np.ndarray, context: int, windows: int) -> np.ndarray:
    """``windows`` disjoint windows of ``context + 1`` tokens from the start of ``val``: the
    fixed validation set every mode is scored on."""
    n = min(windows, (len(val) - 1) // context)
    if n < 1:
        raise ValueError(f"the validation split ({len(val)} tokens) is shorter than one window of {context}")
    return np.stack([val[i * context : i * context + context + 1] for i in range(n)])


def _loss(model: Any, rows: Any) -> Any:
    import torch.nn.functional as F

    logits = model(input_ids=rows[:, :-1]).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), rows[:, 1:].reshape(-1))


def evaluate(model: Any, windows: np.ndarray, batch: int, device: Any) -> float:
    """Mean next-token loss (nats) over every target of ``windows``."""
    import torch

    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), batch):
            rows = torch.as_tensor(windows[i : i + batch], dtype=torch.long, device=device)
            k = rows.shape[0] * (rows.shape[1] - 1)
            total += float(_loss(model, rows)) * k
            n += k
    model.train()
    return total / n


def _finite(what: str, value: float, step: int, mode: str) -> float:
    """``value`` when finite, else :class:`~orthoformer.errors.TrainingStopped` naming it: a NaN
    or infinite loss means the weights are spoiled (or were from the start), so the comparison
    has nothing to report."""
    if math.isfinite(value):
        return value
    if step == 0:
        raise TrainingStopped(
            f"the {what} of mode {mode} is {value} before training: the model's weights hold NaN "
            "or infinity, or its logits overflow; check the model folder"
        )
    raise TrainingStopped(
        f"the {what} of mode {mode} became {value} at step {step}, so fine-tuning stopped: "
        "lower --lr or raise --warmup"
    )


def _lr(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up, then cosine to a tenth of ``lr``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * p)))


def _peak_memory_mib(device: Any) -> dict[str, float]:
    """Peak resident memory of this process (and of CUDA allocations on a GPU), in MiB."""
    import torch

    out = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if getattr(device, "type", str(device)) == "cuda":
        out["peak_cuda_allocated_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


def finetune(
    model: Any,
    train: np.ndarray,
    val: np.ndarray,
    mode: str,
    *,
    steps: int,
    context: int,
    batch: int,
    lr: float = 1e-4,
    warmup: int = 10,
    weight_decay: float = 0.0,
    val_windows_n: int = 32,
    seed: int = 0,
    device: Any = "cpu",
    eval_every: int = 0,
    lora_rank: int = LORA_RANK,
    lora_alpha: float = LORA_ALPHA,
    lora_targets: Sequence[str] = LINEARS,
) -> dict[str, Any]:
    """Fine-tunes ``model`` in ``mode`` (see :data:`MODES`) for ``steps`` AdamW steps of
    ``batch`` random windows of ``context`` tokens of ``train`` drawn from ``seed`` (the same
    windows in every mode), and returns the report: validation loss on ``val_windows_n`` fixed
    windows of ``val`` before and after (and, with ``eval_every`` > 0, after every
    ``eval_every`` steps: ``curve``), trainable and total parameters, mean step time over the
    steps after the first (milliseconds, evaluations excluded), and peak memory; for ``full``
    and ``lora``, the effective rank of the targets' updates (``update_rank``). A non-finite
    training or validation loss raises :class:`~orthoformer.errors.TrainingStopped`."""
    import torch

    for name, value in (
        ("steps", steps),
        ("context", context),
        ("batch", batch),
        ("val_windows_n", val_windows_n),
    ):
        integer(name, value, lo=1)
    integer("eval_every", eval_every, lo=0, hint="0: validate before and after only")
    integer("warmup", warmup, lo=0)
    number("lr", lr, lo=0.0)
    number("weight_decay", weight_decay, lo=0.0)
    seed = seed_check("seed", seed)
    if len(train) <= context + 1:
        raise ValueError(f"the training split ({len(train)} tokens) is shorter than one window of {context}")
    device = torch.device(device)
    lora_rank, lora_alpha, lora_targets = check_lora(lora_rank, lora_alpha, lora_targets)
    # Full fine-tuning's updates are measured against a copy of the targets' start.
    start = _targets(model, lora_targets) if mode == "full" else {}
    start = {n: w.detach().clone() for n, w in start.items()}
    model = prepare_mode_(
        model.to(device),
        mode,
        seed=seed,
        lora_rank=lora_rank,
        lora_alpha=lora_alpha,
        lora_targets=lora_targets,
    )
    model.train()
    windows = val_windows(val, context, val_windows_n)
    before = _finite("validation loss", evaluate(model, windows, batch, device), 0, mode)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    # One generator draws the windows, so every mode trains on the same batches.
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(train) - context - 1, size=(steps, batch))
    times, losses = [], []
    curve = [{"step": 0, "val_loss": before}]
    for s in range(steps):
        rows = torch.as_tensor(
            np.stack([train[i : i + context + 1] for i in starts[s]]), dtype=torch.long, device=device
        )
        for g in opt.param_groups:
            g["lr"] = _lr(s, steps, lr, warmup)
        t0 = time.perf_counter()
        loss = _loss(model, rows)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
        losses.append(_finite("training loss", float(loss.detach()), s + 1, mode))
        if eval_every and (s + 1) % eval_every == 0 and s + 1 < steps:
            val_loss = _finite("validation loss", evaluate(model, windows, batch, device), s + 1, mode)
            curve.append({"step": s + 1, "val_loss": val_loss})
    after = _finite("validation loss", evaluate(model, windows, batch, device), steps, mode)
    curve.append({"step": steps, "val_loss": after})
    timed = times[1:] or times
    ranks: dict[str, Any] = {}
    if mode == "full":
        now = _targets(model, lora_targets)
        ranks = {
            "update_rank": update_ranks({n: (now[n].detach() - w.to(device)).cpu() for n, w in start.items()})
        }
    elif mode == "lora":
        ranks = {"update_rank": update_ranks({n: d.cpu() for n, d in lora_deltas(model).items()})}
        ranks |= {"lora": {"rank": lora_rank, "alpha": lora_alpha, "targets": list(lora_targets)}}
    return {
        "mode": mode,
        "steps": steps,
        "context": context,
        "batch": batch,
        "lr": lr,
        "seed": seed,
        "val_windows": int(len(windows)),
        "val_loss_before": before,
        "val_loss_after": after,
        "curve": curve,
        "train_loss_last10": float(np.mean(losses[-10:])),
        "trainable": trainable_parameters(model),
        "total": sum(p.numel() for p in model.parameters()) + _frozen_values(model),
        "ms_per_step": 1000.0 * float(np.mean(timed)),
        # Gradients and AdamW's two moments of the trainable values (float32), exact.
        "grad_and_adam_mib": trainable_parameters(model) * 12 / 2**20,
        **_peak_memory_mib(device),
        **ranks,
    }


def _targets(model: Any, targets: Sequence[str]) -> dict[str, Any]:
    """The weights of the target linears of every decoder layer, by ``layers.i.name``."""
    layers = getattr(getattr(model, "model", model), "layers", [])
    out = {}
    for i, block in enumerate(layers):
        for t in targets:
            out[f"layers.{i}.{t}"] = getattr(owner_of(block, t), t).weight
    return out


def _frozen_values(model: Any) -> int:
    """Values of the frozen orthogonal projections (buffers, outside ``parameters()``)."""
    from .torch.frozen import FrozenOrthogonalLinear

    return sum(m.weight.numel() for m in model.modules() if isinstance(m, FrozenOrthogonalLinear))
