"""``python -m orthoformer.train``: ``orthoformer train`` in PyTorch, data parallel or sharded.

Takes the same options, with the same names and defaults (read from the library), and writes
the same checkpoint folder (``model.safetensors``, ``optimizer.safetensors``, ``state.json``,
``metrics.jsonl``): a run can be resumed by either tool and evaluated by ``orthoformer eval``.
One process trains on the device ``--device`` picks (``auto``: CUDA when available); launched
by ``torchrun --nproc_per_node=N`` it trains with DistributedDataParallel (NCCL on CUDA, gloo
on the CPU), or with FSDP2 under ``--fsdp``, each rank reading its own shard of every batch,
and rank 0 writes the files. The data is a UTF-8 text (``--data``, tokenized here) or a folder
of token files (``--data-dir``, from ``python -m orthoformer.prepare``), whose tokenizer the
checkpoint records. ``--batch`` rows run per micro-step (over all ranks), ``--grad-accum``
micro-steps make one optimizer step. ``@FILE`` reads flags from a file (one or more per line,
``#`` comments), as the recipes in ``python/recipes/`` do. ``--arch llama`` trains the
Llama-style model of :mod:`orthoformer.torch.llama` instead (:mod:`.train_llama`), with every
one of these modes, into a Llama checkpoint folder (:mod:`orthoformer.torch.llama_run`).

    python -m orthoformer.train --attention orthogonal --steps 2000 --out runs/ortho
    python -m orthoformer.train --arch llama --kv-heads 2 --attention orthogonal --out runs/llama
    torchrun --nproc_per_node=8 -m orthoformer.train @python/recipes/gpt2-small.args \
        --data-dir data/owt --batch 96 --grad-accum 5 --out runs/gpt2
    python -m orthoformer.train --out runs/gpt2 --resume --steps 700000

Errors print one line and exit with status 2, as the command line does. A run interrupted by
SIGINT or SIGTERM writes a checkpoint and exits with status 75 (``EX_TEMPFAIL``: resume it
with ``--resume``), so a scheduler can tell pre-emption from bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import traceback
from typing import Any, Optional
from collections.abc import Sequence

from . import _native
from .errors import EXIT_INTERRUPTED, Interrupted, TrainingStopped
from .outputs import check_apart
from .train_flags import OPTIM_FLAGS, OPTIONS, check_args, parser
from .validate import env_integer, one_line


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The training options the flags ask for, the recipe's or the library's defaults
    filled in."""
    o = json.loads(_native.recipe(args.recipe)[1] if args.recipe else json.dumps(OPTIONS))
    for _, key, _ in OPTIM_FLAGS:
        value = getattr(args, key)
        if value is None:
            continue
        if key in ("weight_decay", "beta2"):
            o["adamw"][key] = value
        else:
            o[key] = value
    if args.lr_decay_steps is not None:
        o["lr_decay_steps"] = args.lr_decay_steps
    # The step's batch is what the optimisation sees; how it is split is the run's business.
    o["batch"] = o["batch"] * args.grad_accum
    return json.loads(_native.options_check(json.dumps(o)))


def model_config(args: argparse.Namespace) -> str:
    """The model the flags ask for, as the library's JSON: the recipe's model or the default,
    replaced by the preset or file, with the single fields applied, checked (the library's
    rule, as ``orthoformer train``)."""
    return _native.config_resolve(
        args.preset,
        args.config,
        args.attention,
        args.context,
        args.width,
        args.position,
        args.temperature,
        args.recipe,
    )


def open_run(args: argparse.Namespace) -> Any:
    """A fresh or resumed run (text through the native ``Session``, checked as ``orthoformer
    train`` checks it, or a token folder)."""
    from .checkpoint import check_out
    from .tokens import TokenFolder
    from .torch.llama_run import arch_of
    from .torch.runs import TextRun, TokenRun
    from .train_llama import check_gpt_flags, open_llama_run

    arch = args.arch
    if args.resume:
        saved = arch_of(args.out)
        if arch is not None and saved is not None and arch != saved:
            raise ValueError(
                f"checkpoint {args.out} holds a {saved} run, which --arch {arch} cannot resume: drop "
                "--arch (resume takes the checkpoint's), or train a new run into another --out"
            )
        arch = arch or saved
    if arch == "llama":
        return open_llama_run(args)
    check_gpt_flags(args)
    if args.resume:
        if (
            any(getattr(args, key) is not None for _, key, _ in OPTIM_FLAGS if key != "steps")
            or args.tokenizer
            or args.vocab_size
            or args.recipe
        ):
            raise ValueError(
                "--resume continues with the options stored in the checkpoint: drop the optimisation, "
                "recipe and tokenizer flags (only --steps may change)"
            )
        full = args.preset is not None or args.config is not None
        requested = model_config(args) if full else None
        if args.data_dir is not None or _trained_on_tokens(args.out):
            run = TokenRun.resume(pathlib.Path(args.out), args.data_dir, args.steps)
        else:
            # Given the folder, the run keeps no native model on the host (it saves through it).
            run = TextRun(_native.Session.resume(args.out, args.data, args.steps, requested), args.out)
        # The library's check, as `orthoformer train --resume` makes it (a token folder's run
        # has no native session to make it on opening).
        _native.resume_check(
            str(args.out),
            run.config.to_json(),
            requested,
            args.attention,
            args.context,
            args.width,
            args.position,
            args.temperature,
        )
        _check_decay_request(run.options, args)
        return run
    if args.tokenizer != "bpe" and args.vocab_size is not None:
        raise ValueError(
            "--vocab-size applies to --tokenizer bpe only (the character vocabulary is the text's characters)"
        )
    opts = options(args)
    config = model_config(args)
    seed = args.model_seed if args.model_seed is not None else opts["seed"]
    if args.data_dir is not None:
        if args.tokenizer or args.vocab_size:
            raise ValueError(
                "--tokenizer and --vocab-size do not apply to --data-dir: its tokenizer is the folder's"
            )
        # The folder (every field of meta.json against its files, the tokenizer) and the
        # output are checked before the run is built: TokenRun.fresh makes --out.
        TokenFolder(args.data_dir).check_context(json.loads(config)["context"])
        check_out("--out", args.out)
        return TokenRun.fresh(pathlib.Path(args.out), args.data_dir, config, opts, seed)
    return TextRun(
        _native.Session.fresh(
            args.out, config, json.dumps(opts), seed, args.data, args.tokenizer or "char", args.vocab_size
        ),
        args.out,
    )


def _check_decay_request(opts: dict[str, Any], args: argparse.Namespace) -> None:
    """``--lr-decay-steps`` on resume may name the run's horizon again, never change it (the
    library's rule, as ``orthoformer train --resume`` applies it)."""
    kept = opts.get("lr_decay_steps") or opts["steps"]
    if args.lr_decay_steps is not None and args.lr_decay_steps != kept:
        raise ValueError(
            f"checkpoint {args.out} decays the learning rate over {kept} steps, which a resumed run "
            f"keeps (steps past it run at --min-lr): drop --lr-decay-steps {args.lr_decay_steps}, or "
            "train a new run into another --out"
        )


def _trained_on_tokens(out: str) -> bool:
    """Whether the checkpoint in ``out`` was trained on a token folder (its recorded source)."""
    try:
        source = json.loads((pathlib.Path(out) / "state.json").read_text())["data"]["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # the library's own open reports what is wrong
    return (pathlib.Path(source) / "meta.json").is_file()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the trainer; returns the exit status."""
    world = None
    say = _stderr
    try:
        args = parser().parse_args(argv)
        say = _stderr if args.json else (lambda line: print(line, flush=True))
        check_args(args)
        # The checkpoint folder is never an input, inside one, or holding one.
        check_apart(
            "--out",
            args.out,
            [("--data", args.data), ("--data-dir", args.data_dir), ("--config", args.config)],
        )
        # Options, data and model are checked by the library before PyTorch is even imported.
        size = env_integer("WORLD_SIZE", lo=1) or 1
        batch = args.batch if args.batch is not None else OPTIONS["batch"]
        if args.grad_accum < 1:
            raise ValueError(f"--grad-accum {args.grad_accum}: use 1 or more micro-steps per step")
        if not args.resume and batch % size:
            raise ValueError(
                f"--batch {batch} is not divisible by the {size} processes: the global batch is split "
                f"evenly by rank; use a multiple of {size}"
            )
        try:
            from .torch import distributed, precision
            from .torch.progress import tensorboard_writer
            from .torch.trainer import Trainer
        except ImportError as e:
            raise ValueError(f"python -m orthoformer.train needs PyTorch ({e}): pip install torch") from None
        world = distributed.setup(args.device)
        speed = precision.resolve(world.device, args.dtype, args.compile)
        precision.apply(speed)
        if args.fsdp and world.size < 2:
            raise ValueError("--fsdp shards over processes: launch with torchrun --nproc_per_node=N (N > 1)")
        run = world.main_first(lambda: open_run(args))
        tb = tensorboard_writer(args.tensorboard) if world.main else None
        trainer = Trainer(
            run,
            world,
            speed,
            grad_accum=args.grad_accum,
            pad_vocab=args.pad_vocab,
            fsdp=args.fsdp,
            log_every=args.log_every,
            peak_tflops=args.peak_tflops,
            tensorboard=tb,
            log=say,
        )
        if world.main:
            _banner(trainer, run, args)
        state = trainer.run_loop(args.stop_at)
        if world.main:
            report(args, trainer, state)
        return 0
    except Exception as e:
        if not _expected(e):
            raise
        print(f"error: {_as_flags(one_line(e))}", file=sys.stderr)
        return EXIT_INTERRUPTED if isinstance(e, Interrupted) else 2
    finally:
        if world is not None:
            world.close()


def _as_flags(message: str) -> str:
    """The library names option fields (`lr`); on this command line they are flags (`--lr`)."""
    dests = {a.dest for a in parser()._actions if a.option_strings}
    first, sep, rest = message.partition(" ")
    if sep and first in dests:
        return f"--{first.replace('_', '-')} {rest}"
    return message


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _banner(trainer: Any, run: Any, args: argparse.Namespace) -> None:
    """What the run will do, on stderr: device, speed settings, batch, model, vocabulary."""
    w, cfg = trainer.world, trainer.config
    dev = str(w.device)
    if w.device.type == "cuda":
        import torch

        dev += f" ({torch.cuda.get_device_name(w.device)})"
    how = "FSDP2" if args.fsdp else ("DDP" if w.size > 1 else "one process")
    tokens = trainer.options["batch"] * cfg.context
    _stderr(f"device {dev}, {w.size} process(es), {how}; {trainer.speed.describe()}")
    _stderr(
        f"batch {trainer.options['batch']} rows x {cfg.context} tokens = {tokens:,} tokens per step "
        f"({trainer.accum} micro-step(s) of {trainer.local_b} rows per rank)"
    )
    model = getattr(run, "model_line", None) or f"{cfg.attention}, {cfg.n_layer} layers x {cfg.d_model} wide"
    _stderr(f"model {model}; {run.vocab_line}")


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
            "arch": "llama" if hasattr(trainer.run, "llama_config") else "gpt",
            "attention": trainer.config.attention,
            "final": last,
            "metrics": state["metrics"],
            "peak_rss_bytes": _native.peak_rss_bytes(),
            "world_size": trainer.world.size,
            "device": str(trainer.world.device),
            "dtype": trainer.speed.dtype,
            "compile": trainer.speed.compile,
            "grad_accum": trainer.accum,
            "fsdp": trainer.sharding.fsdp,
            "progress": trainer.progress.last,
        }
        dev = trainer.world.device
        if dev.type == "cuda":
            import torch

            summary["device_name"] = torch.cuda.get_device_name(dev)
            summary["peak_cuda_bytes"] = torch.cuda.max_memory_allocated(dev)
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


def leave(status: int) -> None:
    """Ends the process with ``status``. A rank of a ``torchrun`` job ends without the
    interpreter's finalisation: gloo's worker threads may still be releasing the tensors of a
    finished collective, and a thread that takes the GIL while Python finalises aborts the
    process (``terminate called without an active exception``, PyTorch issue 190489), failing a
    run whose checkpoint is already written. Everything this process wrote is closed by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    try:
        code = main()
    except Exception:  # a defect: its traceback, then the same exit as any other status
        traceback.print_exc()
        code = 1
    leave(code)
