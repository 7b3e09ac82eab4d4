"""``python -m orthoformer.train``: ``orthoformer train`` in PyTorch, data parallel.

Takes the same options, with the same names and defaults (read from the library), and writes
the same checkpoint folder (``model.safetensors``, ``optimizer.safetensors``, ``state.json``,
``metrics.jsonl``): a run can be resumed by either tool and evaluated by ``orthoformer eval``.
One process trains on the device ``--device`` picks (``auto``: CUDA when available); launched
by ``torchrun --nproc_per_node=N`` it trains with DistributedDataParallel (NCCL on CUDA, gloo
on the CPU), each rank reading its own shard of every batch, and rank 0 writes the files.

    python -m orthoformer.train --attention orthogonal --steps 2000 --out runs/ortho
    torchrun --nproc_per_node=2 -m orthoformer.train --batch 32 --out runs/ddp
    python -m orthoformer.train --out runs/ddp --resume --steps 4000

Errors print one line and exit with status 2, as the command line does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional
from collections.abc import Sequence

from . import _native
from .data import DEFAULTS
from .errors import TrainingStopped

OPTIONS = DEFAULTS["options"]

# Flags that set training options: (flag, option key, type). Only --steps may change on resume.
OPTIM_FLAGS = [
    ("--steps", "steps", int),
    ("--batch", "batch", int),
    ("--lr", "lr", float),
    ("--warmup", "warmup", int),
    ("--min-lr", "min_lr", float),
    ("--weight-decay", "weight_decay", float),
    ("--beta2", "beta2", float),
    ("--grad-clip", "grad_clip", float),
    ("--eval-every", "eval_every", int),
    ("--eval-iters", "eval_iters", int),
    ("--seed", "seed", int),
]


def _default(key: str) -> Any:
    return OPTIONS["adamw"][key] if key in ("weight_decay", "beta2") else OPTIONS[key]


def parser() -> argparse.ArgumentParser:
    """The argument parser: ``orthoformer train``'s flags plus ``--device``."""
    p = argparse.ArgumentParser(
        prog="python -m orthoformer.train",
        description="Train a GPT in PyTorch (data parallel under torchrun) into an Orthoformer "
        "checkpoint folder.",
    )
    p.add_argument("--data", help="training text, a UTF-8 file [default: the embedded TinyShakespeare]")
    p.add_argument(
        "--tokenizer",
        choices=["char", "bpe"],
        help="one token per character, or byte-level BPE [default: char]",
    )
    p.add_argument(
        "--vocab-size", type=int, help=f"BPE vocabulary (at least 256) [default: {DEFAULTS['bpe_vocab']}]"
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--preset", help=f"model preset [default: {DEFAULTS['preset']} with context {DEFAULTS['context']}]"
    )
    g.add_argument("--config", help="model configuration file (TOML or JSON with the fields of a preset)")
    p.add_argument("--context", type=int, help="context length, overriding the preset")
    p.add_argument("--model-seed", type=int, help="seed of the model's initialisation [default: --seed]")
    p.add_argument(
        "--attention",
        help="softmax, orthogonal, linear, orthogonal-linear, orthogonal-tied, identity-q, "
        "orthogonal-hadamard [default: the preset's]",
    )
    for flag, key, ty in OPTIM_FLAGS:
        p.add_argument(flag, type=ty, help=f"[default: {_default(key)}]")
    p.add_argument("--out", default="runs/train", help="checkpoint folder [default: runs/train]")
    p.add_argument(
        "--resume", action="store_true", help="continue the checkpoint in --out (--steps may extend it)"
    )
    p.add_argument("--stop-at", type=int, help="checkpoint and stop after this many steps")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda [default: auto]")
    return p


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The training options the flags ask for, the library's defaults filled in."""
    o = json.loads(json.dumps(OPTIONS))
    for _, key, _ in OPTIM_FLAGS:
        value = getattr(args, key)
        if value is None:
            continue
        if key in ("weight_decay", "beta2"):
            o["adamw"][key] = value
        else:
            o[key] = value
    return json.loads(_native.options_check(json.dumps(o)))


def open_session(args: argparse.Namespace) -> Any:
    """A fresh or resumed native ``Session``, checked as ``orthoformer train`` checks it."""
    if args.resume:
        if (
            any(getattr(args, key) is not None for _, key, _ in OPTIM_FLAGS if key != "steps")
            or args.tokenizer
            or args.vocab_size
        ):
            raise ValueError(
                "--resume continues with the options stored in the checkpoint: drop the optimisation and "
                "tokenizer flags (only --steps may change)"
            )
        full = args.preset is not None or args.config is not None
        requested = (
            _native.config_resolve(args.preset, args.config, args.attention, args.context) if full else None
        )
        session = _native.Session.resume(args.out, args.data, args.steps, requested)
        have = json.loads(session.config_json())
        for what, asked in (("attention", args.attention), ("context", args.context)):
            if asked is not None and asked != have[what]:
                raise ValueError(
                    f"resuming {args.out}: checkpoint does not match the requested model: {what} is "
                    f"{have[what]} in the checkpoint but {asked} was asked; drop the flag to continue it "
                    "as trained"
                )
        return session
    if args.tokenizer != "bpe" and args.vocab_size is not None:
        raise ValueError(
            "--vocab-size applies to --tokenizer bpe only (the character vocabulary is the text's characters)"
        )
    opts = options(args)
    config = _native.config_resolve(args.preset, args.config, args.attention, args.context)
    seed = args.model_seed if args.model_seed is not None else opts["seed"]
    return _native.Session.fresh(
        args.out, config, json.dumps(opts), seed, args.data, args.tokenizer or "char", args.vocab_size
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the trainer; returns the exit status."""
    args = parser().parse_args(argv)
    world = None
    try:
        # Options, data and model are checked by the library before PyTorch is even imported.
        size = int(os.environ.get("WORLD_SIZE", "1"))
        batch = args.batch if args.batch is not None else OPTIONS["batch"]
        if not args.resume and batch % size:
            raise ValueError(
                f"--batch {batch} is not divisible by the {size} processes: the global batch is split "
                f"evenly by rank; use a multiple of {size}"
            )
        session = open_session(args)
        from .torch import distributed
        from .torch.trainer import Trainer

        world = distributed.setup(args.device)
        trainer = Trainer(session, world)
        state = trainer.run(args.stop_at)
        if world.main:
            report(args, trainer, state)
        return 0
    except Exception as e:
        if not _expected(e):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if world is not None:
            world.close()


def _expected(e: BaseException) -> bool:
    """Whether ``e`` is a user-facing failure (bad input, I/O, a stopped run) rather than a bug."""
    return isinstance(e, (ValueError, OSError, MemoryError, TrainingStopped))


def report(args: argparse.Namespace, trainer: Any, state: dict[str, Any]) -> None:
    """The end-of-run summary (as ``orthoformer train`` prints it)."""
    last = state["metrics"][-1] if state["metrics"] else None
    steps = trainer.options["steps"]
    if args.json:
        summary = {
            "out": os.fspath(args.out),
            "step": state["step"],
            "attention": trainer.config.attention,
            "final": last,
            "metrics": state["metrics"],
            "peak_rss_bytes": _native.peak_rss_bytes(),
            "world_size": trainer.world.size,
            "device": str(trainer.world.device),
        }
        print(json.dumps(summary, indent=2))
    elif state["step"] < steps:
        print(
            f"stopped after step {state['step']} of {steps}; checkpoint in {args.out}: continue with --resume"
        )
    elif last is not None:
        print(
            f"trained {last['step']} steps: train loss {last['train_loss']:.4f}, "
            f"val loss {last['val_loss']:.4f}; checkpoint in {args.out}"
        )


if __name__ == "__main__":
    sys.exit(main())
