"""Progress of a training run, printed by rank 0 every ``--log-every`` steps: loss, learning
rate, the gradient norm of the log step (before clipping), tokens/s (the job's and per
device), ms/step and MFU (model FLOPs per token from the library's exact accounting,
``orthoformer params``, times one device's tokens per second, over the device's peak), and
optionally the same figures and the evaluations in TensorBoard (``--tensorboard DIR``)."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from .. import accounting
from ..config import GPTConfig


def flops_per_token(cfg: GPTConfig) -> int:
    """Forward + backward FLOPs per token of training ``cfg`` at its context (frozen weights'
    gradients not counted, as they are not computed)."""
    f = accounting.params(cfg, seq=cfg.context)["account"]["flops_per_token"]
    return int(f["forward"]) + int(f["backward"])


def tensorboard_writer(folder: Optional[str]) -> Any:
    """A ``SummaryWriter`` into ``folder``; ``ValueError`` when TensorBoard is not installed."""
    if folder is None:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError(
            "--tensorboard needs the tensorboard package: pip install tensorboard (or drop the flag)"
        ) from None
    return SummaryWriter(folder)


class Progress:
    """Accumulates steps between log lines and prints them (rank 0 only). Throughput is given
    for the whole job and per device (``devices`` processes, one device each), and MFU per
    device: each device's tokens/s times FLOPs per token over one device's peak."""

    def __init__(
        self,
        cfg: GPTConfig,
        tokens_per_step: int,
        every: int,
        peak: Optional[float],
        log: Callable[[str], None],
        main: bool,
        tensorboard: Any = None,
        devices: int = 1,
        flops: Optional[int] = None,
    ) -> None:
        self.tokens_per_step, self.every, self.peak = tokens_per_step, every, peak
        self.devices = max(int(devices), 1)
        # ``flops``: the model's own count, for a model the GPT accounting does not describe.
        self.flops = flops if flops is not None else flops_per_token(cfg)
        self.log, self.main, self.tb = log, main, tensorboard
        self.n, self.secs, self.loss = 0, 0.0, 0.0
        self.last: Optional[dict[str, float]] = None

    def steps(self, done: list[tuple], secs: float) -> None:
        """Records steps ``(step (1-based), loss, lr[, gradient norm before clipping])`` that
        took ``secs`` together, and prints a line when the last of them is a multiple of
        ``every`` (the trainer reads the device at every such step, so a line covers exactly
        the steps since the previous); the norm shown is that last step's."""
        if not done:
            return
        self.n += len(done)
        self.secs += secs
        self.loss += sum(d[1] for d in done)
        step, _, lr = done[-1][:3]
        norm = done[-1][3] if len(done[-1]) > 3 else None
        if self.every <= 0 or step % self.every:
            return
        tok_s = self.n * self.tokens_per_step / max(self.secs, 1e-12)
        per_device = tok_s / self.devices
        rec = {
            "loss": self.loss / self.n,
            "lr": lr,
            "tokens_per_s": tok_s,
            "tokens_per_s_per_device": per_device,
            "ms_per_step": self.secs * 1e3 / self.n,
        }
        line = f"step {step:>6}  loss {rec['loss']:.4f}  lr {lr:.3e}  "
        if norm is not None:
            rec["grad_norm"] = norm
            line += f"grad norm {norm:.4g}  "
        line += f"{tok_s:,.0f} tok/s ({per_device:,.0f}/device)  {rec['ms_per_step']:.1f} ms/step"
        if self.peak:
            rec["mfu"] = per_device * self.flops / self.peak
            line += f"  MFU {100 * rec['mfu']:.1f}%"
        self.last = rec
        if self.main:
            self.log(line)
            if self.tb is not None:
                for k, v in rec.items():
                    self.tb.add_scalar(f"train/{k}", v, step)
        self.n, self.secs, self.loss = 0, 0.0, 0.0

    def evaluation(self, rec: dict[str, Any]) -> None:
        """An evaluation record (printed as before, and to TensorBoard)."""
        if not self.main:
            return
        self.log(f"step {rec['step']:>6}  train {rec['train_loss']:.4f}  val {rec['val_loss']:.4f}")
        if self.tb is not None:
            self.tb.add_scalar("eval/train_loss", rec["train_loss"], rec["step"])
            self.tb.add_scalar("eval/val_loss", rec["val_loss"], rec["step"])
            self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


class Timer:
    """Wall time between laps. The trainer laps right after reading the device's figures,
    which waits for the device, so an interval is the device's time for the steps in it
    without a synchronisation of its own in the hot loop."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def lap(self) -> float:
        """Seconds since the previous lap (or the start); starts the next interval."""
        now = time.perf_counter()
        secs, self.start = now - self.start, now
        return secs
