"""One run of a size ladder on the PyTorch engine (``docs/LADDER.md``): the spec the native
``ladder_pending`` gives (a ``RunSpec``) trained by the project's
:class:`~orthoformer.torch.trainer.Trainer`, scored, and written as ``result.json``.

What the trainer sees is a run object like :class:`~orthoformer.torch.runs.TokenRun` with
three differences, all here:

- training batches come from the spec's ``train_range`` of ``train.bin`` only (seeded
  windows, batch ``k`` drawn from ``numpy.random.default_rng([seed, 0, k])`` as
  :class:`~orthoformer.tokens.TokenSampler` draws, so a resumed run draws the same ones);
- its "validation" evaluation is the held-out curve: the first ``eval_batches · batch`` whole
  windows of the held-out range, in ``eval_batches`` batches (``eval_iters`` is that count),
  so the metrics record of each evaluation step is a curve point; its "train" evaluation is
  the same count of windows from the start of the training range;
- ``eval_every`` is the curve's spacing, so the trainer evaluates exactly at ``curve_steps``.

The curve's ``seconds`` are the trainer's own timing (``ms_per_step`` of each record: the
steps' wall time, evaluations and checkpoints excluded), summed. After the last step the
final ranges are scored (held-out, ``val.bin``, ``OUT/transfer.bin``: whole windows, in
batches of ``batch``), and ``result.json`` is written atomically with ``engine: "torch"``.
A ``gpt`` run's folder is the library's token checkpoint (``TokenRun``); a ``llama`` run's is
described in :mod:`orthoformer.ladder_llama`.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Any, Optional

import numpy as np

from . import _native
from .tokens import TokenFolder

#: ``result.json``'s format and the engine's name.
RESULT_FILE, FORMAT, ENGINE = "result.json", "orthoformer-ladder-run", "torch"


def options(spec: dict[str, Any]) -> dict[str, Any]:
    """The library's training options of ``spec`` (checked by the library), as the Rust
    engine's ``RunSpec::train_options``."""
    steps = spec["curve_steps"]
    every = steps[1] - steps[0] if len(steps) > 1 else max(spec["steps"], 1)
    o = {
        "steps": spec["steps"],
        "batch": spec["batch"],
        "lr": spec["lr"],
        "min_lr": spec["min_lr"],
        "warmup": spec["warmup"],
        "grad_clip": spec["grad_clip"],
        "eval_every": every,
        "eval_iters": spec["eval_batches"],
        "seed": spec["seed"],
        "adamw": {
            "beta1": spec["beta1"],
            "beta2": spec["beta2"],
            "eps": spec["eps"],
            "weight_decay": spec["weight_decay"],
        },
    }
    return json.loads(_native.options_check(json.dumps(o)))


class RangeBatches:
    """Seeded random windows of ``t + 1`` tokens starting in ``[lo, hi - t)`` of a memory
    map: the trainer's batch source (``draw``, ``rows``, ``position``)."""

    def __init__(self, tokens: Any, lo: int, hi: int, t: int, seed: int, position: int) -> None:
        if hi - lo <= t:
            raise ValueError(f"the training range [{lo}, {hi}) is shorter than one window of {t + 1} tokens")
        self.tokens, self.lo, self.hi, self.t, self.seed, self.k = tokens, lo, hi, t, seed, position

    def draw(self, b: int) -> None:
        rng = np.random.default_rng([self.seed, 0, self.k])
        self.offsets = rng.integers(self.lo, self.hi - self.t, size=b, dtype=np.int64)
        self.k += 1

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        win = np.stack(
            [np.asarray(self.tokens[o : o + self.t + 1], dtype=np.int64) for o in self.offsets[lo:hi]]
        )
        return win[:, :-1], win[:, 1:]

    def position(self) -> str:
        return str(self.k)


class Windows:
    """Consecutive whole windows of ``[lo, hi)`` (``hi - lo = k·t + 1``): window ``i`` is
    inputs ``lo + i·t ..`` and the next tokens; each ``draw(b)`` takes the next ``b``."""

    def __init__(self, tokens: Any, lo: int, hi: int, t: int) -> None:
        self.tokens, self.lo, self.t = tokens, lo, t
        self.count = max(0, (hi - lo - 1) // t)
        self.next_window = 0

    def draw(self, b: int) -> None:
        first = self.next_window
        n = min(b, self.count - first)
        if n <= 0:
            raise ValueError("the evaluation range holds fewer windows than asked for")
        start = self.lo + first * self.t
        block = np.asarray(self.tokens[start : start + n * self.t + 1], dtype=np.int64)
        self.x = block[:-1].reshape(n, self.t)
        self.y = block[1:].reshape(n, self.t)
        self.next_window += n

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x[lo:hi], self.y[lo:hi]

    def position(self) -> str:
        return str(self.next_window)


class LadderData:
    """The ladder's token files of one spec: ``train.bin`` and ``val.bin`` mapped through the
    checked :class:`~orthoformer.tokens.TokenFolder`, and ``OUT/transfer.bin``."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.folder = TokenFolder(spec["data"])
        self.train, self.val = self.folder.open("train"), self.folder.open("val")
        self.transfer = np.memmap(spec["transfer_file"], dtype="<u4", mode="r")

    def split(self, name: str) -> Any:
        """The tokens a final range is of."""
        return {"heldout": self.train, "val": self.val, "transfer": self.transfer}[name]


def with_ladder_batches(run: Any, spec: dict[str, Any], data: LadderData) -> Any:
    """``run`` (a token run of either architecture) drawing its batches as the module doc
    says: training from ``train_range``, the evaluations from fixed windows."""
    t, b = spec["context"], spec["batch"]
    lo, hi = spec["train_range"]
    train_windows = spec["eval_batches"] * b * t + 1

    def train_batches() -> RangeBatches:
        return RangeBatches(data.train, lo, hi, t, spec["seed"], int(run.state["sampler_word_pos"]))

    def eval_batches(split: str) -> Windows:
        if split == "val":
            return Windows(data.train, *spec["curve_range"], t)
        return Windows(data.train, lo, min(hi, lo + train_windows), t)

    run.train_batches, run.eval_batches = train_batches, eval_batches
    return run


def curve(spec: dict[str, Any], metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The held-out curve from the trainer's metrics records (one per evaluation step)."""
    out, seconds, last = [], 0.0, 0
    per_step, fps = spec["tokens_per_step"], spec["flops_per_step"]
    for rec in metrics:
        step = int(rec["step"])
        if rec.get("ms_per_step") is not None:
            seconds += rec["ms_per_step"] * (step - last) / 1e3
        last = step
        out.append(
            {
                "step": step,
                "tokens": step * per_step,
                "flops": step * fps,
                "seconds": seconds,
                "heldout_loss": float(rec["val_loss"]),
            }
        )
    return out


def score(trainer: Any, spec: dict[str, Any], data: LadderData) -> dict[str, float]:
    """Mean loss per token of the final ranges (whole windows, batches of ``batch``)."""
    import torch

    t, b = spec["context"], spec["batch"]
    model, device = trainer.model, trainer.world.device
    model.eval()
    losses = {}
    with torch.no_grad():
        for name, (lo, hi) in spec["final_ranges"].items():
            w = Windows(data.split(name), lo, hi, t)
            if w.count == 0:
                raise ValueError(f"the {name} range [{lo}, {hi}) holds no window of {t + 1} tokens")
            total = torch.zeros((), dtype=torch.float64, device=device)
            while w.next_window < w.count:
                w.draw(b)
                x, y = (torch.from_numpy(a).to(device) for a in (w.x, w.y))
                with trainer.speed.autocast():
                    _, loss = model(x, y)
                total += loss.double() * x.shape[0]
            losses[f"{name}_loss"] = float(total.item()) / w.count
    model.train()
    return losses


def device_name(device: Any) -> str:
    """What a run ran on, in words."""
    import torch

    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    return f"CPU, {torch.get_num_threads()} threads (torch {torch.__version__})"


def _record(
    spec: dict[str, Any], steps: int, seconds: float, losses: dict[str, float], points: list, device: str
) -> dict[str, Any]:
    """The fields of every ``result.json`` (``docs/LADDER.md``) of a run stopped after ``steps``."""
    return {
        "format": FORMAT,
        "version": 1,
        "engine": ENGINE,
        "device": device,
        "rung": spec["rung"],
        "variant": spec["variant"],
        "seed": spec["seed"],
        "lr": spec["lr"],
        "params": spec["params"],
        "steps": steps,
        "tokens": steps * spec["tokens_per_step"],
        "flops_per_step": spec["flops_per_step"],
        "flops": steps * spec["flops_per_step"],
        "seconds": seconds,
        **losses,
        "curve": points,
        # The settings it trained and was scored under, as the library fingerprints them.
        **({"spec_sha256": spec["fingerprint"]} if "fingerprint" in spec else {}),
    }


def result(
    spec: dict[str, Any], state: dict[str, Any], losses: dict[str, float], device: str
) -> dict[str, Any]:
    """``result.json`` of a finished run (``docs/LADDER.md``)."""
    points = curve(spec, state["metrics"])
    return _record(spec, int(state["step"]), points[-1]["seconds"], losses, points, device)


def write_json(path: pathlib.Path, value: Any) -> None:
    """Writes ``value`` as JSON atomically (staged, flushed, renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(value, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def open_run(spec: dict[str, Any], data: LadderData) -> Any:
    """The spec's run, fresh or continued from its folder's checkpoint."""
    out = pathlib.Path(spec["dir"])
    opts = options(spec)
    if spec["architecture"] == "llama":
        from .ladder_llama import LlamaRun

        run = LlamaRun.open(out, spec, opts, data.folder)
    else:
        from .torch.runs import TokenRun

        if (out / "state.json").exists():
            run = TokenRun.resume(out, spec["data"], None)
            if run.options != opts:
                raise ValueError(f"{out} holds a run with other options than the ladder's: delete the folder")
        else:
            run = TokenRun.fresh(out, spec["data"], json.dumps(spec["model"]), opts, spec["model_seed"])
    return with_ladder_batches(run, spec, data)


def train(spec: dict[str, Any], world: Any, speed: Any, stop_at: Optional[int], log: Any) -> Optional[dict]:
    """Trains the run of ``spec`` (to ``stop_at`` at most) and, when it reached its last
    step, scores it and writes ``result.json``; returns the result (``None``: stopped)."""
    from .torch.trainer import Trainer

    data = LadderData(spec)
    run = open_run(spec, data)
    from .errors import Interrupted, TrainingStopped

    trainer = Trainer(run, world, speed, log=log, pad_vocab=1)
    device = device_name(world.device)
    try:
        state = trainer.run_loop(stop_at)
    except Interrupted:
        raise
    except TrainingStopped as e:
        # A rate this run cannot take: recorded as diverged, so the ladder finishes.
        res = diverged(spec, int(getattr(trainer, "step", 0) or 0), str(e), device)
        write_json(pathlib.Path(spec["dir"]) / RESULT_FILE, res)
        return res
    if int(state["step"]) < spec["steps"]:
        return None
    losses = score(trainer, spec, data)
    bad = [k for k, v in losses.items() if not math.isfinite(v)]
    if bad:
        res = diverged(spec, spec["steps"], f"the final {bad[0]} is {losses[bad[0]]}", device)
    else:
        res = result(spec, state, losses, device)
    write_json(pathlib.Path(spec["dir"]) / RESULT_FILE, res)
    return res


def diverged(spec: dict[str, Any], steps: int, why: str, device: str) -> dict[str, Any]:
    """``result.json`` of a run that diverged after ``steps`` steps: every loss at chance
    (``ln V``), as the Rust engine records it; never chosen, in no reading."""
    chance = math.log(max(int(spec["model"]["vocab_size"]), 1))
    steps = max(0, min(int(steps), int(spec["steps"])))
    losses = {k: chance for k in ("heldout_loss", "val_loss", "transfer_loss")}
    return {**_record(spec, steps, 0.0, losses, [], device), "diverged": why}
