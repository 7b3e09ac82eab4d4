"""The training loop of ``orthoformer train`` (``src/train/trainer.rs``) in PyTorch, data
parallel. Step for step the same run: the global batch is drawn by the library's sampler from
the run's seed and split by rank (rank ``r`` of ``N`` takes rows ``r·B/N .. (r+1)·B/N``), so
``N`` processes compute what one does with the whole batch; DistributedDataParallel averages
the gradients. Then global-norm clipping (f64 norm, ``max_norm / (norm + 1e-6)``), a stop on a
non-finite loss or norm, ``torch.optim.AdamW`` (β, ε and decoupled decay on 2-D tensors only)
at the library's warm-up + cosine rate; every ``eval_every`` steps the train and validation
losses on the library's fixed evaluation batches, and a checkpoint written by the library
from rank 0, which a resumed run (or ``orthoformer train --resume``) continues.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time
from typing import Any, Callable, Optional

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from .. import _native
from ..config import GPTConfig
from ..data import u32
from ..errors import TrainingStopped
from .distributed import World
from .model import GPT


class Trainer:
    """A run of a native ``Session`` (fresh or resumed) on the devices of ``world``."""

    def __init__(self, session: Any, world: World, log: Optional[Callable[[str], None]] = None) -> None:
        self.session, self.world = session, world
        self.log = log if log is not None else (lambda line: print(line, flush=True))
        self.options: dict[str, Any] = json.loads(session.options_json())
        self.options_json = session.options_json()
        self.config = GPTConfig.from_json(session.config_json())
        self.table = session.tensors()
        self.state: dict[str, Any] = json.loads(session.state_json())
        self.t = self.config.context
        b = self.options["batch"]
        if b % world.size:
            raise ValueError(
                f"--batch {b} is not divisible by the {world.size} processes: the global batch is "
                f"split evenly by rank; use a multiple of {world.size}"
            )
        self.local_b = b // world.size
        self.model = GPT.from_parts(self.config, session.frozen(), self.table, session.params()).to(
            world.device
        )
        self.params = dict(self.model.named_parameters())
        self.ddp = self.model
        if world.size > 1:
            ids = [world.device.index] if world.device.type == "cuda" else None
            # Frozen buffers are the same on every rank (regenerated from the seed): no broadcast.
            self.ddp = DistributedDataParallel(self.model, device_ids=ids, broadcast_buffers=False)
        self.opt = self._optimizer()
        self.data = session.data()
        self._check_same_data()
        self.stop_requested = False
        self.stop_agreed = False

    def _check_same_data(self) -> None:
        """Every rank tokenized the text itself: check they agree (vocabulary, token counts,
        a checksum of the ids) before a single batch is drawn."""
        train, val = (np.frombuffer(self.data.tokens(s), dtype="<u4") for s in ("train", "val"))
        checksum = int((train.astype(np.uint64) * np.uint64(2654435761)).sum() % np.uint64(2**61 - 1))
        if not self.world.same_everywhere([self.data.vocab_size(), len(train), len(val), checksum]):
            raise ValueError(
                "the processes tokenized the training text differently: pass the same --data to every rank"
            )

    def _optimizer(self) -> torch.optim.AdamW:
        a = self.options["adamw"]
        decay, rest = self.model.decay_groups()
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": a["weight_decay"]}, {"params": rest, "weight_decay": 0.0}],
            lr=self.options["lr"],
            betas=(a["beta1"], a["beta2"]),
            eps=a["eps"],
        )
        t = int(self.state["adam_t"])
        if t > 0:
            m, v = (np.frombuffer(x, dtype="<f4") for x in self.session.adam_moments())
            for name, shape, offset, _ in self.table:
                n = int(np.prod(shape))
                p = self.params[name]
                opt.state[p] = {
                    "step": torch.tensor(float(t), dtype=torch.float32),
                    "exp_avg": torch.from_numpy(m[offset : offset + n].reshape(shape).copy()).to(p.device),
                    "exp_avg_sq": torch.from_numpy(v[offset : offset + n].reshape(shape).copy()).to(p.device),
                }
        return opt

    # -- batches -----------------------------------------------------------------------------

    def _shard(self, x: bytearray, y: bytearray) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's rows of a global ``(B, T)`` batch, on its device."""
        b, t, r = self.options["batch"], self.t, self.world.rank
        rows = slice(r * self.local_b, (r + 1) * self.local_b)
        xs = torch.from_numpy(u32(x, (b, t))[rows].copy())
        ys = torch.from_numpy(u32(y, (b, t))[rows].copy())
        dev = self.world.device
        return xs.to(dev, non_blocking=True), ys.to(dev, non_blocking=True)

    def estimate_loss(self, split: str) -> float:
        """Mean loss over ``eval_iters`` fixed batches of ``split`` (the library's evaluation
        sampler), no dropout, no gradients, averaged over ranks."""
        sampler = _native.BatchSampler(self.session.eval_seed())
        total = 0.0
        self.model.eval()
        with torch.no_grad():
            for _ in range(self.options["eval_iters"]):
                x, y = self._shard(*sampler.next_batch(self.data, split, self.options["batch"], self.t))
                _, loss = self.model(x, y)
                total += float(self.world.all_reduce_sum(loss.detach().float()).item()) / self.world.size
        self.model.train()
        return float(np.float32(total / self.options["eval_iters"]))

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
        rss = _native.peak_rss_bytes()
        if rss is not None:
            rec["peak_rss_bytes"] = rss
        return rec

    # -- one step ----------------------------------------------------------------------------

    def clip(self) -> float:
        """Global gradient-norm clipping as the library does it: the norm accumulated in f64,
        every gradient scaled by ``max_norm / (norm + 1e-6)`` (rounded to f32) when below 1.
        Returns the norm before clipping."""
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        if not grads:
            return 0.0
        norm = float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads)))
        max_norm = self.options["grad_clip"]
        if max_norm > 0 and math.isfinite(norm):
            coef = max_norm / (norm + 1e-6)
            if coef < 1.0:
                c = float(np.float32(coef))
                for g in grads:
                    g.mul_(c)
        return norm

    def step(self, s: int, sampler: Any) -> tuple[float, float]:
        """Training step ``s`` (0-based): ``(loss of the global batch, gradient norm)``."""
        x, y = self._shard(*sampler.next_batch(self.data, "train", self.options["batch"], self.t))
        if self.config.dropout > 0:
            # Masks depend on the step (as the library's) and the rank (each shard its own).
            torch.manual_seed(s * 65_537 + self.world.rank)
        self.opt.zero_grad(set_to_none=True)
        _, loss = self.ddp(x, y)
        loss.backward()
        # The global batch's mean loss, and whether any rank was asked to stop, in one reduction.
        flags = torch.stack(
            (loss.detach().float(), torch.tensor(float(self.stop_requested), device=loss.device))
        )
        flags = self.world.all_reduce_sum(flags)
        loss_value = float(flags[0].item()) / self.world.size
        self.stop_agreed = bool(flags[1].item() > 0)
        norm = self.clip()
        if not math.isfinite(loss_value) or not math.isfinite(norm):
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
        self.opt.step()
        return loss_value, norm

    # -- checkpoints -------------------------------------------------------------------------

    def save(self, sampler: Any) -> None:
        """Writes the checkpoint (rank 0; the library writes the files)."""
        self.state["sampler_word_pos"] = sampler.word_pos()
        if not self.world.main:
            return
        n = sum(int(np.prod(shape)) for _, shape, _, _ in self.table)
        flat, m, v = (np.zeros(n, dtype="<f4") for _ in range(3))
        t = 0
        for name, shape, offset, _ in self.table:
            p = self.params[name]
            k = int(np.prod(shape))
            flat[offset : offset + k] = p.detach().to("cpu", torch.float32).reshape(-1).numpy()
            st = self.opt.state.get(p, {})
            if "exp_avg" in st:
                m[offset : offset + k] = st["exp_avg"].detach().to("cpu", torch.float32).reshape(-1).numpy()
                v[offset : offset + k] = (
                    st["exp_avg_sq"].detach().to("cpu", torch.float32).reshape(-1).numpy()
                )
                t = int(float(st["step"]))
        self.state["adam_t"] = t
        self.session.save(flat.tobytes(), json.dumps(self.state), m.tobytes(), v.tobytes())

    # -- the loop ----------------------------------------------------------------------------

    def run(self, stop_at: Optional[int] = None) -> dict[str, Any]:
        """Trains to ``steps`` (or stops after ``stop_at``), checkpointing at each evaluation
        and at the end; returns the loop state. Ctrl-C checkpoints and raises
        :class:`TrainingStopped`."""
        o, st = self.options, self.state
        end = o["steps"] if stop_at is None else min(stop_at, o["steps"])
        sampler = _native.BatchSampler(o["seed"], st["sampler_word_pos"])
        previous = signal.signal(signal.SIGINT, self._interrupt)
        try:
            if not st["metrics"]:
                st["metrics"].append(self.evaluate(0, o["lr"], None))
            timed, secs = 0, 0.0
            while st["step"] < end:
                if self.stop_agreed or (self.world.size == 1 and self.stop_requested):
                    self.save(sampler)
                    raise TrainingStopped(
                        f"interrupted at step {st['step']}; a checkpoint was written: continue with --resume"
                    )
                s = st["step"]
                started = time.perf_counter()
                loss, _ = self.step(s, sampler)
                self.world.synchronize()
                secs += time.perf_counter() - started
                timed += 1
                st["window_loss"] += loss
                st["window_steps"] += 1
                st["step"] = s + 1
                if st["step"] % o["eval_every"] == 0 or st["step"] == o["steps"]:
                    lr = _native.schedule_lr(self.options_json, s)
                    rec = self.evaluate(st["step"], lr, (timed, secs))
                    rec["step_loss"] = float(np.float32(st["window_loss"] / st["window_steps"]))
                    st["window_loss"], st["window_steps"] = 0.0, 0
                    st["metrics"].append(rec)
                    self.save(sampler)
                    st["last_checkpoint"] = st["step"]
                    timed, secs = 0, 0.0
                    if self.world.main:
                        self.log(
                            f"step {rec['step']:>6}  train {rec['train_loss']:.4f}  val {rec['val_loss']:.4f}"
                        )
            if st.get("last_checkpoint") != st["step"]:
                self.save(sampler)
                st["last_checkpoint"] = st["step"]
            return st
        finally:
            signal.signal(signal.SIGINT, previous)

    def _interrupt(self, signum: int, frame: Any) -> None:
        if self.stop_requested:
            raise KeyboardInterrupt
        self.stop_requested = True
        if self.world.main:
            print(
                "interrupt: writing a checkpoint at the end of this step (Ctrl-C again to quit now)",
                file=sys.stderr,
                flush=True,
            )
