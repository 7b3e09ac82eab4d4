"""``python -m orthoformer.ladder``: the size ladder (``docs/LADDER.md``) on the PyTorch
engine, the same plan and files as ``orthoformer ladder`` (the CPU engine).

    python -m orthoformer.ladder --plan ladder-plan.json --out runs/ladder
    python -m orthoformer.ladder --out runs/ladder --resume
    python -m orthoformer.ladder --out runs/ladder --report-only --json

Everything but training is the library's, reached through the native module: the plan is
checked and the folder started by ``_native.ladder_start``; ``_native.ladder_pending`` lists
the runs without ``result.json`` (each with its folder, model, steps, schedule, token ranges,
curve steps, FLOPs and parameter counts); ``_native.ladder_report`` chooses the rates, adds
rates beyond the grid's edges (whose runs then show up as pending), fits the curves and
writes the report. This module trains each pending run (:mod:`orthoformer.ladder_run`), asks
for the pending runs again (rate extensions), and repeats until none is left, then reports.

``--stop-at STEP`` trains every pending run to at most STEP steps and stops (no report);
``--resume`` continues: finished runs are kept, an unfinished one continues from its
checkpoint. Errors print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any, Optional

from . import _native
from .errors import TrainingStopped
from .validate import ArgumentParser, InputError, choice, device, input_file, integer, one_line

#: ``--dtype`` and ``--compile`` choices (as ``python -m orthoformer.train``).
DTYPES, COMPILES = ("auto", "fp32", "bf16", "fp16"), ("auto", "on", "off")


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = ArgumentParser(prog="python -m orthoformer.ladder", description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", help="the ladder's plan (JSON); with --resume, checked against OUT's")
    p.add_argument("--out", required=True, help="the ladder's folder")
    p.add_argument("--resume", action="store_true", help="continue the ladder in --out")
    p.add_argument("--stop-at", help="train each pending run to at most this step, then stop")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N [default: auto]")
    p.add_argument("--dtype", default="auto", help=f"{', '.join(DTYPES)} [default: auto]")
    p.add_argument("--compile", default="auto", help=f"{', '.join(COMPILES)} [default: auto]")
    p.add_argument(
        "--jobs",
        default="1",
        help="runs that train at once, each in its own process on --device (tiny models leave a "
        "GPU mostly idle between kernel launches; on the CPU each job gets its share of the "
        "threads, which may change the last bits of the losses); each run's seconds are its own "
        "under that sharing [default: 1]",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument("--report-only", action="store_true", help="write the report of the finished runs only")
    p.add_argument(
        "--partial",
        action="store_true",
        help="with --report-only: report the rungs whose runs are all finished and name the others",
    )
    return p


def _check(args: argparse.Namespace) -> Optional[int]:
    """The flags checked before anything is read or started; returns ``--stop-at``."""
    device("--device", args.device)
    args.jobs = integer("--jobs", _int_or_text(args.jobs), lo=1, hi=256)
    choice("--dtype", args.dtype, DTYPES)
    choice("--compile", args.compile, COMPILES)
    stop_at = None
    if args.stop_at is not None:
        stop_at = integer("--stop-at", _int_or_text(args.stop_at), lo=1)
    if args.report_only and stop_at is not None:
        raise InputError("--report-only trains nothing: leave --stop-at out")
    if args.partial and not args.report_only:
        raise InputError("--partial goes with --report-only (a report of the finished rungs)")
    if args.plan is None and not (args.resume or args.report_only):
        raise InputError("--plan is required to start a ladder (or --resume one in --out)")
    if args.plan is not None:
        input_file("--plan", args.plan)
    out = pathlib.Path(args.out)
    if not (args.resume or args.report_only) and (out / "ladder.json").exists():
        raise InputError(f"{out} holds a ladder already: continue it with --resume, or choose another --out")
    if (args.resume or args.report_only) and not (out / "ladder.json").exists():
        raise InputError(f"{out} holds no ladder (no ladder.json): start one with --plan")
    return stop_at


def _int_or_text(text: str) -> Any:
    try:
        return int(text, 10)
    except ValueError:
        return text


def pending(out: str) -> list[dict[str, Any]]:
    """The runs of the ladder in ``out`` without ``result.json``."""
    return json.loads(_native.ladder_pending(out))


def run_all(out: str, train: Any, stop_at: Optional[int], say: Any) -> bool:
    """Trains pending runs (``train(specs)``) until none is left (True) or ``stop_at`` cut
    them (False)."""
    seen: set[str] = set()
    # One pass per rung, and one per rate added beyond an edge (at most ``extend`` per edge),
    # then the look that finds none pending: more than that means the runs are not finishing.
    plan = json.loads((pathlib.Path(out) / "ladder.json").read_text(encoding="utf-8"))
    passes = len(plan["rungs"]) * (1 + 2 * plan["extend"])
    for _ in range(passes + 1):
        todo = pending(out)
        if not todo:
            return True
        if stop_at is None:
            # One rung a pass, as the Rust engine does: a rung's due rates are trained before
            # the next rung starts, so a finished rung is final and ran on one machine.
            todo = [s for s in todo if s["rung"] == todo[0]["rung"]]
        again = [s["dir"] for s in todo if s["dir"] in seen]
        if again and stop_at is None:
            raise ValueError(f"{again[0]} is still pending after it was trained: see its folder")
        train(todo)
        seen.update(s["dir"] for s in todo)
        if stop_at is not None:
            return not pending(out)
    raise ValueError(f"the ladder in {out} still has pending runs after {passes} passes")


def label(i: int, n: int, spec: dict[str, Any]) -> str:
    """The progress line of run ``i`` of ``n``."""
    return (
        f"[{i}/{n}] {spec['rung']} seed {spec['seed']} lr {spec['lr']:g} {spec['variant']} "
        f"({spec['architecture']}, {spec['steps']} steps)"
    )


def _serial(world: Any, speed: Any, stop_at: Optional[int], say: Any) -> Any:
    """Trains the runs one after another in this process."""
    from . import ladder_run

    def train(todo: list[dict[str, Any]]) -> None:
        for i, spec in enumerate(todo, 1):
            say(label(i, len(todo), spec))
            ladder_run.train(spec, world, speed, stop_at, lambda line: say("    " + line))

    return train


def _parallel(args: argparse.Namespace, stop_at: Optional[int], say: Any) -> Any:
    """Trains the runs ``--jobs`` at a time, each in a worker process (spawned: CUDA cannot
    be forked) that sets up the device once."""
    from . import ladder_jobs

    def train(todo: list[dict[str, Any]]) -> None:
        ladder_jobs.train_all(todo, args.jobs, args.device, args.dtype, args.compile, stop_at, label, say)

    return train


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the ladder; returns the exit status."""
    world = None
    claim = None
    try:
        args = parser().parse_args(argv)
        stop_at = _check(args)
        say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
        out = str(pathlib.Path(args.out).resolve()) if pathlib.Path(args.out).exists() else args.out
        # Claimed (checked against the plan, locked) before any work, as the CLI claims it: a
        # second ladder into this folder, from either engine, is refused at once. A partial
        # report only reads the runs, so it may run beside the engine training them.
        plan_in = [("plan", args.plan)] if args.plan is not None else []
        if not args.partial:
            claim = _native.claim_outputs(plan_in, [("out", args.out, "folder")])
        if args.plan is not None:
            _native.ladder_start(pathlib.Path(args.plan).read_text(encoding="utf-8"), out)
        done = True
        if not args.report_only:
            try:
                from .torch import distributed, precision
            except ImportError as e:
                raise ValueError(
                    f"python -m orthoformer.ladder needs PyTorch ({e}): pip install torch"
                ) from None
            world = distributed.setup(args.device)
            if world.size > 1:
                raise InputError(
                    "the ladder trains on one device: run it without torchrun (--jobs N for runs at once)"
                )
            if args.jobs == 1:
                speed = precision.resolve(world.device, args.dtype, args.compile)
                precision.apply(speed)
                train = _serial(world, speed, stop_at, say)
            else:
                world.close()
                world = None
                train = _parallel(args, stop_at, say)
            done = run_all(out, train, stop_at, say)
        if not done:
            say(
                f"stopped at step {stop_at}: continue with "
                f"python -m orthoformer.ladder --out {args.out} --resume"
            )
            if args.json:
                print(json.dumps({"stopped_at": stop_at, "pending": len(pending(out))}))
            return 0
        report = _native.ladder_report(out, partial=args.partial)
        if args.json:
            print(report)
        else:
            say(f"report: {pathlib.Path(out) / 'report.md'}")
        return 0
    except (ValueError, OSError, TrainingStopped) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    finally:
        if world is not None:
            world.close()
        if claim is not None:
            claim.release()


if __name__ == "__main__":
    sys.exit(main())
