"""The training loop of ``orthoformer train`` (``src/train/trainer.rs``) in PyTorch, data
parallel (DDP) or sharded (FSDP2), in mixed precision, compiled, with gradient accumulation.
Step for step the same run: the step's batch (``batch`` rows: ``--batch`` per micro-step
times ``--grad-accum``) is drawn by the run's seeded sampler; micro-step ``j`` takes rows
``j·b .. (j+1)·b`` and rank ``r`` of ``N`` its ``b/N`` of them, so any split of the same rows
computes the same mean gradient (up to summation order). Then global-norm clipping as
``torch.nn.utils.clip_grad_norm_(foreach=True)`` does it (fp32 norm, every gradient scaled by
``min(1, max_norm / (norm + 1e-6))``; the library's f64 norm differs by ~1e-7 relative),
``AdamW`` (β, ε and decoupled decay on 2-D tensors only) at the library's warm-up + cosine
rate; every ``eval_every`` steps the train and validation losses on fixed evaluation batches
and a checkpoint in the library's format, written by rank 0 from full tensors.

The hot loop never waits for the device: losses, gradient norms and the ranks' stop flags
stay there and are read in one transfer at log steps, evaluation steps and at least every
:data:`READ_EVERY` steps. A non-finite loss or norm is therefore seen at the next read: the
steps taken after it (on weights it already spoiled) are discarded with the run, which stops
with one line naming the first bad step; every checkpoint comes after a read, so none holds
a spoiled model and the folder keeps the last good one. SIGINT and SIGTERM (preemption)
write a checkpoint at the end of the current step (under ``torchrun``: of the next read
step, which every rank agrees on) and stop.

The model is built where it runs, without a host copy: from the seed for a fresh run, from
the checkpoint's ``model.safetensors`` (tensor by tensor) for a resumed one; the run's native
model is dropped first (:meth:`~orthoformer.torch.runs.TextRun.release`).
"""

from __future__ import annotations

import math
import signal
import sys
from typing import Any, Callable, Optional

import numpy as np
import torch

from .. import _native
from ..errors import Interrupted, TrainingStopped
from .distributed import World
from .precision import Speed, peak_flops
from .progress import Progress, Timer
from .runs import DeviceBatches
from .sharding import Sharding, full, is_dtensor, local

#: The host reads the device's losses and flags at least this often (in steps).
READ_EVERY = 50


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
    devices of ``world`` with the settings of ``speed``; the output head pads the vocabulary
    to a multiple of ``pad_vocab`` (1: no padding)."""

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
        pad_vocab: int = 64,
    ) -> None:
        self.run, self.world, self.speed = run, world, speed
        self.log = log if log is not None else (lambda line: print(line, flush=True))
        self.options, self.options_json = run.options, run.options_json
        self.config, self.state = run.config, run.state
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
        self.model = run.build_model(world.device, pad_vocab)
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
            devices=world.size,
            flops=getattr(run, "flops_per_token", None),
        )
        self.log_every = log_every
        self.stop_requested = False
        self.stop_agreed = False
        # Steps not read yet: (step, loss summed over ranks, gradient norm, lr), on the device.
        self.pending: list[tuple[int, torch.Tensor, torch.Tensor, float]] = []
        # The last step's gradient norm read back, for the next metrics record.
        self.last_norm: Optional[float] = None
        self.stop_flag: Optional[torch.Tensor] = None
        self.timed_steps, self.timed_secs = 0, 0.0

    @property
    def table(self) -> list:
        """The library's tensor table of the model (buffer order)."""
        return self.run.table

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
            # Views of the run's buffers (writable bytearrays): on the CPU the state is them.
            m, v = (np.frombuffer(x, dtype="<f4") for x in self.run.moments())
            for name, shape, offset, _ in self.table:
                n = int(np.prod(shape))
                mt, vt = (torch.from_numpy(a[offset : offset + n].reshape(shape)) for a in (m, v))
                self.sharding.load_moments(opt, self.params[name], t, mt, vt, self.speed.fused)
        return opt

    # -- batches -----------------------------------------------------------------------------

    def batches(self, source: Any, prefetch: bool) -> DeviceBatches:
        """This rank's micro-batches of ``source`` on its device (prefetched on CUDA)."""
        b, n, r = self.options["batch"], self.world.size, self.world.rank
        rows = [micro_rows(b, self.accum, n, r, j) for j in range(self.accum)]
        return DeviceBatches(source, b, rows, self.world.device, prefetch)

    def estimate_loss(self, split: str) -> float:
        """Mean loss over ``eval_iters`` fixed batches of ``split``, no dropout, no gradients,
        averaged over micro-steps and ranks."""
        batches = self.batches(self.run.eval_batches(split), prefetch=False)
        total = torch.zeros((), dtype=torch.float64, device=self.world.device)
        self.model.eval()
        with torch.no_grad():
            for _ in range(self.options["eval_iters"]):
                for x, y in batches.next():
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
                self._stopped(what, rec[key], step)
        rss = _native.peak_rss_bytes()
        if rss is not None:
            rec["peak_rss_bytes"] = rss
        return rec

    def _stopped(self, what: str, value: float, step: int) -> None:
        last = self.state.get("last_checkpoint")
        kept = (
            f"the last good checkpoint (step {last}) is kept"
            if last is not None
            else ("no checkpoint had been written yet")
        )
        raise TrainingStopped(
            f"the {what} became {value} at step {step}, so training stopped; {kept}; lower --lr, "
            "raise --warmup or set --grad-clip"
        )

    # -- one step ----------------------------------------------------------------------------

    def clip(self) -> torch.Tensor:
        """Global gradient-norm clipping as ``clip_grad_norm_(foreach=True)``: the fp32 norm
        of the per-tensor norms (over every rank's shard under FSDP), every gradient scaled by
        ``min(1, max_norm / (norm + 1e-6))`` on the device. Returns the norm (a 0-d tensor)."""
        grads = [local(p.grad) for p in self.params.values() if p.grad is not None]
        if not grads:
            return torch.zeros((), device=self.world.device)
        norms = torch._foreach_norm(grads)
        if any(is_dtensor(p.grad) for p in self.params.values() if p.grad is not None):
            norm = self.world.all_reduce_sum(torch.stack(norms).square().sum()).sqrt()
        else:
            norm = torch.linalg.vector_norm(torch.stack(norms))
        max_norm = self.options["grad_clip"]
        if max_norm > 0:
            torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm

    def step(
        self, s: int, micro: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training step ``s`` (0-based) on this rank's micro-batches: ``(the step's loss
        summed over ranks, gradient norm)``, 0-d device tensors nobody waits for."""
        if self.config.dropout > 0:
            # Masks depend on the step (as the library's) and the rank (each shard its own).
            torch.manual_seed(s * 65_537 + self.world.rank)
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=torch.float32, device=self.world.device)
        for j, (x, y) in enumerate(micro):
            with self.sharding.sync_gradients(j == self.accum - 1):
                with self.speed.autocast():
                    _, loss = self.sharding.module(x, y)
                scaled = loss.float() / self.accum if self.accum > 1 else loss.float()
                (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
            total += loss.detach().float()
        loss_sum = total / self.accum
        if self.world.size > 1:
            # The step's loss and whether any rank was asked to stop, in one reduction; a fill
            # kernel (not a host-to-device copy) carries the flag.
            stop = torch.full((), float(self.stop_requested), device=total.device)
            flags = self.world.all_reduce_sum(torch.stack((loss_sum, stop)))
            loss_sum, self.stop_flag = flags[0], flags[1]
        if self.scaler is not None:
            self.scaler.unscale_(self.opt)
        norm = self.clip()
        lr = _native.schedule_lr(self.options_json, s)
        for g in self.opt.param_groups:
            g["lr"] = lr
        if self.scaler is not None:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()
        return loss_sum, norm

    def _read_step(self, step: int, end: int) -> bool:
        """Whether the host reads the device after ``step``: log steps, every
        :data:`READ_EVERY` steps, the last step."""
        logs = self.log_every > 0 and step % self.log_every == 0
        return logs or step % READ_EVERY == 0 or step == end

    def read(self, timer: Timer) -> None:
        """Reads the pending steps' losses, norms and the stop flag in one transfer (the only
        wait for the device), then accounts them in order: the first non-finite one stops
        the run (see the module doc), the others feed the loss window and the progress line."""
        if not self.pending and self.stop_flag is None:
            return
        figures = [x for _, loss, norm, _ in self.pending for x in (loss, norm.float())]
        if self.stop_flag is not None:
            figures.append(self.stop_flag)
        values = torch.stack(figures).tolist() if figures else []
        secs = timer.lap()
        if self.stop_flag is not None:
            self.stop_agreed = values.pop() > 0
            self.stop_flag = None
        pending, self.pending = self.pending, []
        st, done = self.state, []
        for i, (step, _, _, lr) in enumerate(pending):
            loss, norm = values[2 * i] / self.world.size, values[2 * i + 1]
            # With fp16 an overflowing gradient is the scaler's business (it skips the step
            # and lowers the scale); a non-finite loss is always the end.
            if not math.isfinite(loss) or (not math.isfinite(norm) and self.scaler is None):
                what, value = ("loss", loss) if not math.isfinite(loss) else ("gradient norm", norm)
                self._stopped(what, value, step)
            st["window_loss"] += loss
            st["window_steps"] += 1
            done.append((step, loss, lr, norm))
            self.last_norm = norm
        self.timed_steps += len(done)
        self.timed_secs += secs
        self.progress.steps(done, secs)

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
        frozen = None
        if self.model.frozen_pinned():  # matrices not regenerable from the config's seed
            frozen = {
                k: b.detach().to("cpu", torch.float32).numpy() for k, b in self.model.frozen_buffers().items()
            }
        self.run.save(flat.tobytes(), self.state, m.tobytes(), v.tobytes(), frozen)

    # -- the loop ----------------------------------------------------------------------------

    def run_loop(self, stop_at: Optional[int] = None) -> dict[str, Any]:
        """Trains to ``steps`` (or stops after ``stop_at``), checkpointing at each evaluation
        and at the end; returns the loop state. SIGINT or SIGTERM checkpoints and raises
        :class:`~orthoformer.errors.Interrupted`."""
        o, st = self.options, self.state
        end = o["steps"] if stop_at is None else min(stop_at, o["steps"])
        batches = self.batches(self.run.train_batches(), prefetch=self.world.device.type == "cuda")
        previous = {sig: signal.signal(sig, self._interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
        timer = Timer()
        try:
            if not st["metrics"]:
                st["metrics"].append(self.evaluate(0, o["lr"], None))
            timer.lap()
            while st["step"] < end:
                if self.stop_agreed or (self.world.size == 1 and self.stop_requested):
                    self.read(timer)  # nothing spoiled goes into the checkpoint
                    self.save(batches)
                    raise Interrupted(
                        f"interrupted at step {st['step']}; a checkpoint was written: continue with --resume"
                    )
                s = st["step"]
                loss, norm = self.step(s, batches.next())
                if s + 1 < end:
                    batches.prefetch()  # drawn and sent while this step computes
                lr = _native.schedule_lr(self.options_json, s)
                self.pending.append((s + 1, loss, norm, lr))
                st["step"] = s + 1
                evaluation = st["step"] % o["eval_every"] == 0 or st["step"] == o["steps"]
                if evaluation or self._read_step(st["step"], end):
                    self.read(timer)
                if evaluation:
                    rec = self.evaluate(st["step"], lr, (self.timed_steps, self.timed_secs))
                    rec["step_loss"] = float(np.float32(st["window_loss"] / st["window_steps"]))
                    rec["grad_norm"] = self.last_norm
                    st["window_loss"], st["window_steps"] = 0.0, 0
                    st["metrics"].append(rec)
                    self.save(batches)
                    st["last_checkpoint"] = st["step"]
                    self.timed_steps, self.timed_secs = 0, 0.0
                    self.progress.evaluation(rec)
                    timer.lap()  # evaluation and checkpoint are not training time
            self.read(timer)
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
