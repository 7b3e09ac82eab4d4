"""``python -m orthoformer.finetune``: fine-tune a pretrained Hugging Face Llama-family model
(SmolLM2-135M, as ``orthoformer rotate --out DIR`` writes it from the GGUF) on a text in
three ways at the same budget, and report validation loss, trainable parameters, peak memory
and step time of each:

- ``full``: every weight trains;
- ``qk-pretrained``: ``q_proj``/``k_proj`` frozen at their pretrained values, the rest trains;
- ``qk-orthogonal``: ``q_proj``/``k_proj`` replaced by frozen random orthogonal matrices
  (:func:`orthoformer.torch.freeze_qk_`), the rest trains.

Every mode sees the same batches (one seed draws them) and is scored on the same fixed
validation windows (the last 10% of the tokens), before and after training. From the command
line each mode runs in its own child process, so that the peak resident memory reported is
that mode's alone (on CUDA the peak of allocated memory is reported as well).

    python -m orthoformer.finetune --model runs/smollm2-hf --data data/tinyshakespeare.txt \
        --steps 60 --context 256 --batch 2 --out runs/finetune.json

Errors print one line and exit with status 2, a non-finite loss (training or validation)
included: it stops the mode, as it stops ``orthoformer train``, instead of being reported.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import resource
import subprocess
import sys
import time
from typing import Any, Optional
from collections.abc import Sequence

import numpy as np

from .errors import TrainingStopped
from .validate import ArgumentParser, InputError, claim_file, device as device_name, integer, number, one_line
from .validate import seed as seed_check

#: The three ways of fine-tuning, in the order they are reported.
MODES = ("full", "qk-pretrained", "qk-orthogonal")


def _need_transformers() -> Any:
    try:
        import transformers
    except ImportError as e:  # one clear line: the test extra installs it
        raise ImportError("orthoformer.finetune needs transformers: pip install transformers") from e
    return transformers


def prepare_mode_(model: Any, mode: str, *, seed: int = 0) -> Any:
    """Sets ``model`` (a ``transformers`` Llama-family causal LM) up for ``mode`` in place:
    ``full`` changes nothing, ``qk-pretrained`` stops gradients to every ``q_proj``/``k_proj``
    weight, ``qk-orthogonal`` replaces them by frozen orthogonal matrices drawn from ``seed``
    (their biases, where a model has them, train). Returns ``model``."""
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
) -> dict[str, Any]:
    """Fine-tunes ``model`` in ``mode`` (see :data:`MODES`) for ``steps`` AdamW steps of
    ``batch`` random windows of ``context`` tokens of ``train`` drawn from ``seed`` (the same
    windows in every mode), and returns the report: validation loss on ``val_windows_n`` fixed
    windows of ``val`` before and after (and, with ``eval_every`` > 0, after every
    ``eval_every`` steps: ``curve``), trainable and total parameters, mean step time over the
    steps after the first (milliseconds, evaluations excluded), and peak memory. A non-finite
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
    model = prepare_mode_(model.to(device), mode, seed=seed)
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
    }


def _frozen_values(model: Any) -> int:
    """Values of the frozen orthogonal projections (buffers, outside ``parameters()``)."""
    from .torch.frozen import FrozenOrthogonalLinear

    return sum(m.weight.numel() for m in model.modules() if isinstance(m, FrozenOrthogonalLinear))


def load_text_tokens(model_dir: pathlib.Path, text: pathlib.Path) -> np.ndarray:
    """``text`` tokenized with the model folder's ``tokenizer.json``."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    return np.asarray(tok.encode(text.read_text(encoding="utf-8")).ids, dtype=np.int64)


def run_mode(args: argparse.Namespace) -> dict[str, Any]:
    """One mode on the folder's model, as the command line's child process runs it."""
    import torch

    transformers = _need_transformers()
    torch.manual_seed(args.seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(args.model), dtype=torch.float32)
    train, val = split_tokens(load_text_tokens(args.model, args.data))
    return finetune(
        model,
        train,
        val,
        args.mode,
        steps=args.steps,
        context=args.context,
        batch=args.batch,
        lr=args.lr,
        warmup=args.warmup,
        val_windows_n=args.val_windows,
        seed=args.seed,
        device=args.device,
        eval_every=args.eval_every,
    )


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m orthoformer.finetune", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=pathlib.Path, required=True, help="Hugging Face Llama-family folder")
    p.add_argument("--data", type=pathlib.Path, required=True, help="UTF-8 text (last 10%% validates)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma list of {', '.join(MODES)}")
    p.add_argument("--mode", help=argparse.SUPPRESS)  # one mode, in this process (the child)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--val-windows", type=int, default=32)
    p.add_argument(
        "--eval-every", type=int, default=0, help="also validate every N steps (0: before and after only)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", type=pathlib.Path, help="also write the reports here (JSON)")
    return p


def _check(args: argparse.Namespace) -> list[str]:
    """Every option, then the model folder and the text, checked before anything is loaded,
    trained or written; returns the modes to run."""
    for flag, value in (("--steps", args.steps), ("--context", args.context), ("--batch", args.batch)):
        integer(flag, value, lo=1)
    integer("--val-windows", args.val_windows, lo=1)
    integer("--warmup", args.warmup, lo=0, hint="0: no warm-up")
    integer("--eval-every", args.eval_every, lo=0, hint="0: validate before and after only")
    number("--lr", args.lr, lo=0.0)
    seed_check("--seed", args.seed)
    device_name("--device", args.device)
    modes = args.modes.split(",")
    for m in [*modes, *([args.mode] if args.mode is not None else [])]:
        if m not in MODES:
            raise InputError(f"--modes: {m!r} is not one of {', '.join(MODES)}")
    if len(set(modes)) != len(modes):
        raise InputError(f"--modes {args.modes}: a mode is named twice")
    if not (args.model / "config.json").is_file() or not (args.model / "tokenizer.json").is_file():
        raise InputError(
            f"{args.model} is not a Hugging Face folder with config.json and tokenizer.json "
            "(write one with: orthoformer rotate --model MODEL.gguf --out DIR)"
        )
    if not args.data.is_file():
        raise InputError(f"{args.data} is not a file: pass a UTF-8 text with --data")
    return modes


def _check_data(args: argparse.Namespace) -> None:
    """The text against the model: UTF-8, its ids inside the model's vocabulary, and long
    enough for a training window and a validation window of ``--context`` (checked here, in
    seconds, rather than by each mode's process after loading the model)."""
    try:
        vocab = json.loads((args.model / "config.json").read_text(encoding="utf-8")).get("vocab_size")
    except (ValueError, AttributeError, OSError) as e:
        raise InputError(f"{args.model}/config.json is not a JSON object ({one_line(e)})") from None
    vocab = integer(f"{args.model}/config.json field vocab_size", vocab, lo=1)
    try:
        ids = load_text_tokens(args.model, args.data)
    except UnicodeDecodeError as e:
        raise InputError(f"--data {args.data}: not UTF-8 text (byte {e.start}): convert it") from None
    except (OSError, ValueError):
        raise
    except Exception as e:  # the tokenizers package's own errors on a bad tokenizer.json
        raise InputError(f"{args.model}/tokenizer.json: cannot be read ({one_line(e)})") from None
    if ids.size and ids.max() >= vocab:
        raise InputError(
            f"{args.model}/tokenizer.json gives id {int(ids.max())}, outside the model's vocab_size {vocab}: "
            "the tokenizer is not the model's"
        )
    train, val = split_tokens(ids)
    if len(train) <= args.context + 1 or len(val) <= args.context:
        raise InputError(
            f"--data {args.data}: {len(train)} training and {len(val)} validation tokens, too few for one "
            f"window of --context {args.context}: use a longer text or a shorter --context"
        )


def table(reports: Sequence[dict[str, Any]]) -> str:
    """The reports as a Markdown table."""
    lines = [
        "| mode | trainable | val loss before | val loss after | ms/step | peak RSS (MiB) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in reports:
        lines.append(
            f"| {r['mode']} | {r['trainable']:,} | {r['val_loss_before']:.4f} | "
            f"{r['val_loss_after']:.4f} | {r['ms_per_step']:.0f} | {r['peak_rss_mib']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the comparison (or, with ``--mode``, one mode); returns the exit status."""
    claim = None
    try:
        args = _parser().parse_args(argv)
        modes = _check(args)
        if args.mode:
            print(json.dumps(run_mode(args)))
            return 0
        _check_data(args)
        # The report file is claimed (checked, locked) before minutes of training, not after.
        claim = claim_file("--out", args.out) if args.out else None
        reports = []
        for m in modes:
            child = [a for a in (argv if argv is not None else sys.argv[1:])]
            p = subprocess.run(
                [sys.executable, "-m", "orthoformer.finetune", *child, "--mode", m],
                capture_output=True,
                text=True,
                env=dict(os.environ),
            )
            if p.returncode != 0:
                last = (p.stderr.strip().splitlines() or ["no message"])[-1].removeprefix("error: ")
                raise RuntimeError(f"mode {m} failed: {last}")
            reports.append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(f"{m}: {json.dumps(reports[-1])}", file=sys.stderr)
        print(table(reports))
        if claim is not None:
            staged = claim.stage(args.out.name)
            staged.write_text(json.dumps(reports, indent=1) + "\n")
            claim.commit([args.out.name])
            claim.close()
            claim = None
    except (ValueError, OSError, RuntimeError, TrainingStopped) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    finally:
        if claim is not None:
            claim.close(ok=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
