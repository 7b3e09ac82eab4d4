"""``python -m orthoformer.ladder --jobs N``: pending runs trained N at a time, each in a
worker process of its own on the same device.

Tiny models leave a GPU idle between kernel launches, and one Python process launches them
one at a time: several processes fill those gaps. On the CPU each worker takes its share of
the threads. Every run trains on the same windows from the same initial values as with one
job (on the CPU a worker's fewer threads may change the float summation order, so the last
bits); the seconds each run records are its own under that sharing. Workers are spawned,
not forked (CUDA cannot be forked), and set up the device once. A failed run stops the
ladder with its error once the runs in progress have finished (their results stay); the
runs not yet started are cancelled."""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Optional

from .errors import TrainingStopped

_WORKER: dict[str, Any] = {}


def _setup(device: str, dtype: str, compile_: str, threads: int) -> None:
    """The worker's device and precision, once per process."""
    import torch

    from .torch import distributed, precision

    torch.set_num_threads(threads)
    world = distributed.setup(device)
    speed = precision.resolve(world.device, dtype, compile_)
    precision.apply(speed)
    _WORKER.update(world=world, speed=speed)


def _train(spec: dict[str, Any], stop_at: Optional[int]) -> list[str]:
    """One run in the worker; returns its log lines (printed by the parent, in one piece).
    Once a run of this worker has stopped (an interrupt: the whole process group gets it),
    the runs already queued to it do not start."""
    from . import ladder_run

    if _WORKER.get("stopped"):
        raise TrainingStopped("not started: the ladder was stopped")
    lines: list[str] = []
    try:
        ladder_run.train(spec, _WORKER["world"], _WORKER["speed"], stop_at, lines.append)
    except TrainingStopped:
        _WORKER["stopped"] = True
        raise
    return lines


def train_all(
    todo: list[dict[str, Any]],
    jobs: int,
    device: str,
    dtype: str,
    compile_: str,
    stop_at: Optional[int],
    label: Any,
    say: Any,
) -> None:
    """Trains ``todo`` on ``jobs`` workers; raises the first run's error after the others end."""
    jobs = min(jobs, len(todo))
    if jobs == 0:
        return
    threads = max(1, (os.cpu_count() or 1) // jobs)
    ctx = multiprocessing.get_context("spawn")
    first_error: Optional[BaseException] = None
    # An interrupt reaches the whole process group: each worker writes its run's checkpoint
    # and stops (and starts no queued run); this process waits for them, ignoring it.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with ProcessPoolExecutor(
            jobs, mp_context=ctx, initializer=_setup, initargs=(device, dtype, compile_, threads)
        ) as pool:
            futures = {pool.submit(_train, spec, stop_at): (i, spec) for i, spec in enumerate(todo, 1)}
            for future in as_completed(futures):
                i, spec = futures[future]
                try:
                    lines = future.result()
                except Exception as e:  # the run's own error, raised once the others end
                    first_error = first_error or e
                    for f in futures:
                        f.cancel()
                    continue
                say(label(i, len(todo), spec) + " done")
                for line in lines:
                    say("    " + line)
    finally:
        signal.signal(signal.SIGINT, previous)
    if first_error is not None:
        raise first_error
