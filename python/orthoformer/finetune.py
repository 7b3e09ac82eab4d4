"""``python -m orthoformer.finetune``: fine-tune a pretrained Hugging Face Llama-family model
(SmolLM2-135M, as ``orthoformer rotate --out DIR`` writes it from the GGUF) on a text in up
to four ways at the same budget (the first three by default), and report validation loss,
trainable parameters, peak memory and step time of each:

- ``full``: every weight trains;
- ``qk-pretrained``: ``q_proj``/``k_proj`` frozen at their pretrained values, the rest trains;
- ``qk-orthogonal``: ``q_proj``/``k_proj`` replaced by frozen random orthogonal matrices
  (:func:`orthoformer.torch.freeze_qk_`), the rest trains;
- ``lora`` (only when asked for): every weight frozen, each ``--lora-targets`` linear learns
  a rank ``--lora-rank`` update scaled by ``--lora-alpha / --lora-rank``
  (:mod:`orthoformer.torch.lora`).

``full`` and ``lora`` also report the effective rank of the learned updates of the target
linears (``update_rank``: singular values of ``ΔW``, invariant under a rotation of the base).

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
import os
import pathlib
import re
import subprocess
import sys
from typing import Any, Optional
from collections.abc import Sequence

import numpy as np

from .errors import TrainingStopped
from .validate import ArgumentParser, InputError, claim_file, device as device_name, integer, number, one_line
from .validate import seed as seed_check

from .finetune_loop import (  # noqa: F401  (the loop's names, re-exported)
    DEFAULT_MODES,
    LORA_ALPHA,
    LORA_RANK,
    MODES,
    _need_transformers,
    evaluate,
    finetune,
    prepare_mode_,
    split_tokens,
    trainable_parameters,
    val_windows,
)
from .torch.lora import LINEARS, check_lora


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
        lora_rank=args.lora_rank,
        lora_alpha=args.lora_alpha,
        lora_targets=args.lora_targets.split(","),
    )


def _parser() -> argparse.ArgumentParser:
    # The module doc's first two paragraphs (what it does, the modes), without reST markup.
    doc = re.sub(r":\w+:`([^`]*)`", r"\1", __doc__).replace("``", "").split("\n\n")
    p = ArgumentParser(
        prog="python -m orthoformer.finetune",
        description=f"{doc[0]}\n\n{doc[1]}",
        epilog="exit status: 0 done; 2 bad arguments or input, an I/O error, a failed mode\n"
        "or a non-finite loss (one line on stderr)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", type=pathlib.Path, required=True, help="Hugging Face Llama-family folder")
    p.add_argument("--data", type=pathlib.Path, required=True, help="UTF-8 text (last 10%% validates)")
    p.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma list of {', '.join(MODES)} (default {','.join(DEFAULT_MODES)})",
    )
    p.add_argument("--mode", help=argparse.SUPPRESS)  # one mode, in this process (the child)
    p.add_argument("--steps", type=int, default=60, help="optimizer steps of each mode (default 60)")
    p.add_argument("--context", type=int, default=256, help="tokens per training window (default 256)")
    p.add_argument("--batch", type=int, default=2, help="windows per step (default 2)")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW's peak learning rate (default 1e-4)")
    p.add_argument(
        "--warmup",
        type=int,
        default=10,
        help="steps of linear warm-up to --lr, then cosine decay to a tenth of it (default 10)",
    )
    p.add_argument(
        "--val-windows", type=int, default=32, help="validation windows of --context tokens (default 32)"
    )
    p.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="also validate every N steps (default 0: before and after only)",
    )
    p.add_argument(
        "--lora-rank",
        type=int,
        default=LORA_RANK,
        help=f"rank of the lora mode's updates (default {LORA_RANK})",
    )
    p.add_argument(
        "--lora-alpha",
        type=float,
        default=LORA_ALPHA,
        help=f"their scale is alpha / rank (default {LORA_ALPHA:g})",
    )
    p.add_argument(
        "--lora-targets",
        default=",".join(LINEARS),
        help=f"comma list of the linears lora adapts (default all: {','.join(LINEARS)})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="draws the batches, qk-orthogonal's frozen matrices and lora's A (default 0)",
    )
    p.add_argument(
        "--device", default="cpu", help="torch device to train on: auto, cpu, cuda or cuda:N (default cpu)"
    )
    p.add_argument("--out", type=pathlib.Path, help="also write the reports here (JSON; default: none)")
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
    check_lora(args.lora_rank, args.lora_alpha, args.lora_targets.split(","), flags=True)
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
        "| mode | trainable | val loss before | val loss after | update eff. rank | ms/step "
        "| peak RSS (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in reports:
        rank = f"{r['update_rank']['effective_rank']:.1f}" if "update_rank" in r else "-"
        lines.append(
            f"| {r['mode']} | {r['trainable']:,} | {r['val_loss_before']:.4f} | "
            f"{r['val_loss_after']:.4f} | {rank} | {r['ms_per_step']:.0f} | {r['peak_rss_mib']:.0f} |"
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
