"""The training loop of ``orthoformer train`` (``src/train/trainer.rs``) in PyTorch, data
parallel (DDP) or sharded (FSDP2), in mixed precision, compiled, with gradient accumulation.
Step for step the same run: the step's batch (``batch`` rows: ``--batch`` per micro-step
times ``--grad-accum``) is drawn by the run's seeded sampler; micro-step ``j`` takes rows
``j·b .. (j+1)·b`` and rank ``r`` of ``N`` its ``b/N`` of them, so any split of the same rows
computes the same mean gradient (up to summation order). Then global-norm clipping (f64
norm, ``max_norm / (norm + 1e-6)``), a stop on a non-finite loss or norm, ``AdamW`` (β, ε and
decoupled decay on 2-D tensors only) at the library's warm-up + cosine rate; every
``eval_every`` steps the train and validation losses on fixed evaluation batches and a
checkpoint in the library's format, written by rank 0 from full tensors. SIGINT and SIGTERM
(preemption) write a checkpoint at the end of the current step on every rank and stop.
"""

from __future__ import annotations

import math
import signal
import sys
from typing import Any, Callable, Optional

import numpy as np
import torch

from .. import _native
from ..errors import TrainingStopped
from .distributed import World
from .model import GPT
from .precision import Speed, peak_flops
from .progress import Progress, Timer
from .sharding import Sharding, full, is_dtensor, local


def micro_rows(batch: int, accum: int, size: int, rank: int, j: int) -> tuple[int, int]:
    """Rows ``[lo, hi)`` of a step's ``batch`` that rank ``rank`` of ``size`` reads in
    micro-step ``j`` of ``accum``: micro-step ``j`` takes rows ``j·b .. (j+1)·b`` (``b =
    batch / accum``), split evenly by rank."""
    micro = batch // accum
    local = micro // size
    lo = j * micro + rank * local
    return lo, lo + local


class Trainer:
    """A run (:mod:`orthoformer.torch.runs`: text or token folder, fresh or resumed) on the
    devices of ``world`` with the settings of ``speed``."""

    def __init__(
        self,
        run: Any,
        world: World,
        speed: Speed,
        *,
        grad_accum: int = 1,
        fsdp: bool = False,
        log_every: int = 0,
        peak_tflops: Optional[float] = None,
        tensorboard: Any = None,
        log: Optional[Callable[[str], None]] = None,
    ) -> None:
        self.run, self.world, self.speed = run, world, speed
        self.log = log if log is not None else (lambda line: print(line, flush=True))
        self.options, self.options_json = run.options, run.options_json
        self.config, self.table, self.state = run.config, run.table, run.state
        self.t = self.config.context
        b = self.options["batch"]
        if b % (grad_accum * world.size):
            raise ValueError(
                f"the step's batch of {b} rows does not split into {grad_accum} micro-steps on "
                f"{world.size} processes: use a batch divisible by {grad_accum * world.size}"
            )
        self.accum, self.micro = grad_accum, b // grad_accum
        self.local_b = self.micro // world.size
        if not world.same_everywhere(run.fingerprint()):
            raise ValueError("the processes read different training data: pass the same data to every rank")
        self.model = GPT.from_parts(self.config, run.frozen(), self.table, run.params()).to(world.device)
        self.sharding = Sharding(self.model, world, fsdp, speed.autocast_dtype, speed.compile)
        self.params = dict(self.model.named_parameters())
        self.opt = self._optimizer()
        self.scaler = speed.scaler()
        self.progress = Progress(
            self.config,
            b * self.t,
            log_every,
            peak_flops(speed, peak_tflops),
            self.log,
            world.main,
            tensorboard,
        )
        self.stop_requested = False
        self.stop_agreed = False

    def _optimizer(self) -> torch.optim.AdamW:
        a = self.options["adamw"]
        decay, rest = self.model.decay_groups()
        kw = {"fused": True} if self.speed.fused else {}
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": a["weight_decay"]}, {"params": rest, "weight_decay": 0.0}],
            lr=self.options["lr"],
            betas=(a["beta1"], a["beta2"]),
            eps=a["eps"],
            **kw,
        )
        t = int(self.state["adam_t"])
        if t > 0:
            m, v = (np.frombuffer(x, dtype="<f4") for x in self.run.moments())
            for name, shape, offset, _ in self.table:
                n = int(np.prod(shape))
                mt, vt = (torch.from_numpy(a[offset : offset + n].reshape(shape).copy()) for a in (m, v))
                self.sharding.load_moments(opt, self.params[name], t, mt, vt, self.speed.fused)
        return opt

    # -- batches -----------------------------------------------------------------------------

    def _micro(self, batches: Any, j: int) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's rows of micro-step ``j`` of the drawn batch, on its device."""
        x, y = batches.rows(
            *micro_rows(self.options["batch"], self.accum, self.world.size, self.world.rank, j)
        )
        dev = self.world.device
        return (
            torch.from_numpy(np.ascontiguousarray(x)).to(dev, non_blocking=True),
            torch.from_numpy(np.ascontiguousarray(y)).to(dev, non_blocking=True),
        )

    def estimate_loss(self, split: str) -> float:
        """Mean loss over ``eval_iters`` fixed batches of ``split``, no dropout, no gradients,
        averaged over micro-steps and ranks."""
        batches = self.run.eval_batches(split)
        total = torch.zeros((), dtype=torch.float64, device=self.world.device)
        self.model.eval()
        with torch.no_grad():
            for _ in range(self.options["eval_iters"]):
                batches.draw(self.options["batch"])
                for j in range(self.accum):
                    x, y = self._micro(batches, j)
                    with self.speed.autocast():
                        _, loss = self.model(x, y)
                    total += loss.detach().double()
        self.model.train()
        total = self.world.all_reduce_sum(total)
        n = self.options["eval_iters"] * self.accum * self.world.size
        return float(np.float32(float(total.item()) / n))

    def evaluate(self, step: int, lr: float, speed: Optional[tuple[int, float]]) -> dict[str, Any]:
        """One metrics record (the library's ``MetricRecord`` fields)."""
        tokens_per_s = ms_per_step = None
        if speed is not None and speed[1] > 0:
            steps, secs = speed
            tokens_per_s = steps * self.options["batch"] * self.t / secs
            ms_per_step = secs * 1e3 / steps
        rec = {
            "step": step,
            "train_loss": self.estimate_loss("train"),
            "val_loss": self.estimate_loss("val"),
            "step_loss": None,
            "lr": lr,
            "tokens_per_s": tokens_per_s,
            "ms_per_step": ms_per_step,
        }
        # A non-finite evaluation is never recorded: its checkpoint would be refused by every
        # reader (and by the library's writer). Stop, keeping the last good checkpoint.
        for what, key in (
            ("evaluation loss on the training split", "train_loss"),
            ("validation loss", "val_loss"),
        ):
            if not math.isfinite(rec[key]):
                last = self.state.get("last_checkpoint")
                kept = (
                    f"the last good checkpoint (step {last}) is kept"
                    if last is not None
                    else "no checkpoint had been written yet"
                )
                raise TrainingStopped(
                    f"the {what} became {rec[key]} at step {step}, so training stopped; {kept}; lower --lr, "
                    "raise --warmup or set --grad-clip"
                )
        rss = _native.peak_rss_bytes()
        if rss is not None:
            rec["peak_rss_bytes"] = rss
        return rec

    # -- one step ----------------------------------------------------------------------------

    def clip(self) -> float:
        """Global gradient-norm clipping as the library does it: the norm accumulated in f64
        (over every rank's shard under FSDP), every gradient scaled by ``max_norm / (norm +
        1e-6)`` (rounded to f32) when below 1. Returns the norm before clipping."""
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        if not grads:
            return 0.0
        sq = torch.stack([(local(g).double() ** 2).sum() for g in grads]).sum()
        if any(is_dtensor(g) for g in grads):
            sq = self.world.all_reduce_sum(sq)
        norm = float(torch.sqrt(sq))
        max_norm = self.options["grad_clip"]
        if max_norm > 0 and math.isfinite(norm):
            coef = max_norm / (norm + 1e-6)
            if coef < 1.0:
                c = float(np.float32(coef))
                for g in grads:
                    g.mul_(c)
        return norm

    def step(self, s: int, batches: Any) -> tuple[float, float]:
        """Training step ``s`` (0-based): ``(loss of the step's batch, gradient norm)``."""
        batches.draw(self.options["batch"])
        if self.config.dropout > 0:
            # Masks depend on the step (as the library's) and the rank (each shard its own).
            torch.manual_seed(s * 65_537 + self.world.rank)
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=torch.float32, device=self.world.device)
        for j in range(self.accum):
            x, y = self._micro(batches, j)
            with self.sharding.sync_gradients(j == self.accum - 1):
                with self.speed.autocast():
                    _, loss = self.sharding.module(x, y)
                scaled = loss.float() / self.accum if self.accum > 1 else loss.float()
                (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
            total += loss.detach().float()
        # The step's mean loss, and whether any rank was asked to stop, in one reduction.
        flags = torch.stack(
            (total / self.accum, torch.tensor(float(self.stop_requested), device=total.device))
        )
        flags = self.world.all_reduce_sum(flags)
        loss_value = float(flags[0].item()) / self.world.size
        self.stop_agreed = bool(flags[1].item() > 0)
        if self.scaler is not None:
            self.scaler.unscale_(self.opt)
        norm = self.clip()
        # With fp16 an overflowing gradient is the scaler's business (it skips the step and
        # lowers the scale); a non-finite loss is always the end.
        bad_norm = not math.isfinite(norm) and self.scaler is None
        if not math.isfinite(loss_value) or bad_norm:
            what, value = ("loss", loss_value) if not math.isfinite(loss_value) else ("gradient norm", norm)
            last = self.state.get("last_checkpoint")
            kept = (
                f"the last good checkpoint (step {last}) is kept"
                if last is not None
                else "no checkpoint had been written yet"
            )
            raise TrainingStopped(
                f"the {what} became {value} at step {s + 1}, so training stopped; {kept}; lower --lr, "
                "raise --warmup or set --grad-clip"
            )
        lr = _native.schedule_lr(self.options_json, s)
        for g in self.opt.param_groups:
            g["lr"] = lr
        if self.scaler is not None:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()
        return loss_value, norm

    # -- checkpoints -------------------------------------------------------------------------

    def save(self, batches: Any) -> None:
        """Writes the checkpoint: full tensors gathered on every rank (a collective under
        FSDP), written by rank 0 through the library."""
        self.state["sampler_word_pos"] = batches.position()
        n = sum(int(np.prod(shape)) for _, shape, _, _ in self.table)
        flat, m, v = (np.zeros(n, dtype="<f4") for _ in range(3))
        for name, shape, offset, _ in self.table:
            p = self.params[name]
            k = int(np.prod(shape))
            st = self.opt.state.get(p, {})
            parts = [(flat, p.detach())]
            if "exp_avg" in st:
                parts += [(m, st["exp_avg"]), (v, st["exp_avg_sq"])]
            for dst, src in parts:
                value = full(src)
                if self.world.main:
                    dst[offset : offset + k] = value.detach().to("cpu", torch.float32).reshape(-1).numpy()
        if not self.world.main:
            return
        # AdamW's count is the loop's (an fp16 step the scaler skipped still counts).
        self.state["adam_t"] = self.state["step"]
        self.run.save(flat.tobytes(), self.state, m.tobytes(), v.tobytes())

    # -- the loop ----------------------------------------------------------------------------

    def run_loop(self, stop_at: Optional[int] = None) -> dict[str, Any]:
        """Trains to ``steps`` (or stops after ``stop_at``), checkpointing at each evaluation
        and at the end; returns the loop state. SIGINT or SIGTERM checkpoints and raises
        :class:`TrainingStopped`."""
        o, st = self.options, self.state
        end = o["steps"] if stop_at is None else min(stop_at, o["steps"])
        batches = self.run.train_batches()
        previous = {sig: signal.signal(sig, self._interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
        timer = Timer(self.world.synchronize)
        try:
            if not st["metrics"]:
                st["metrics"].append(self.evaluate(0, o["lr"], None))
            timed, secs = 0, 0.0
            while st["step"] < end:
                if self.stop_agreed or (self.world.size == 1 and self.stop_requested):
                    self.save(batches)
                    raise TrainingStopped(
                        f"interrupted at step {st['step']}; a checkpoint was written: continue with --resume"
                    )
                s = st["step"]
                with timer:
                    loss, _ = self.step(s, batches)
                secs += timer.secs
                timed += 1
                st["window_loss"] += loss
                st["window_steps"] += 1
                st["step"] = s + 1
                lr = _native.schedule_lr(self.options_json, s)
                self.progress.step(st["step"], loss, lr, timer.secs)
                if st["step"] % o["eval_every"] == 0 or st["step"] == o["steps"]:
                    rec = self.evaluate(st["step"], lr, (timed, secs))
                    rec["step_loss"] = float(np.float32(st["window_loss"] / st["window_steps"]))
                    st["window_loss"], st["window_steps"] = 0.0, 0
                    st["metrics"].append(rec)
                    self.save(batches)
                    st["last_checkpoint"] = st["step"]
                    timed, secs = 0, 0.0
                    self.progress.evaluation(rec)
            if st.get("last_checkpoint") != st["step"]:
                self.save(batches)
                st["last_checkpoint"] = st["step"]
            return st
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.progress.close()

    def _interrupt(self, signum: int, frame: Any) -> None:
        if self.stop_requested:
            raise KeyboardInterrupt
        self.stop_requested = True
        if self.world.main:
            name = signal.Signals(signum).name
            print(
                f"{name}: writing a checkpoint at the end of this step (again to quit now)",
                file=sys.stderr,
                flush=True,
            )
