"""Progress of a training run, printed by rank 0 every ``--log-every`` steps: loss, learning
rate, tokens/s, ms/step and MFU (model FLOPs per token from the library's exact accounting,
``orthoformer params``, times tokens per second, over the device's peak), and optionally the
same figures and the evaluations in TensorBoard (``--tensorboard DIR``)."""

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
    """Accumulates steps between log lines and prints them (rank 0 only)."""

    def __init__(
        self,
        cfg: GPTConfig,
        tokens_per_step: int,
        every: int,
        peak: Optional[float],
        log: Callable[[str], None],
        main: bool,
        tensorboard: Any = None,
    ) -> None:
        self.tokens_per_step, self.every, self.peak = tokens_per_step, every, peak
        self.flops = flops_per_token(cfg)
        self.log, self.main, self.tb = log, main, tensorboard
        self.steps, self.secs, self.loss = 0, 0.0, 0.0
        self.last: Optional[dict[str, float]] = None

    def step(self, step: int, loss: float, lr: float, secs: float) -> None:
        """Records step ``step`` (1-based) and prints a line every ``every`` steps."""
        self.steps += 1
        self.secs += secs
        self.loss += loss
        if self.every <= 0 or step % self.every:
            return
        tok_s = self.steps * self.tokens_per_step / max(self.secs, 1e-12)
        rec = {
            "loss": self.loss / self.steps,
            "lr": lr,
            "tokens_per_s": tok_s,
            "ms_per_step": self.secs * 1e3 / self.steps,
        }
        line = (
            f"step {step:>6}  loss {rec['loss']:.4f}  lr {lr:.3e}  {tok_s:,.0f} tok/s  "
            f"{rec['ms_per_step']:.1f} ms/step"
        )
        if self.peak:
            rec["mfu"] = tok_s * self.flops / self.peak
            line += f"  MFU {100 * rec['mfu']:.1f}%"
        self.last = rec
        if self.main:
            self.log(line)
            if self.tb is not None:
                for k, v in rec.items():
                    self.tb.add_scalar(f"train/{k}", v, step)
        self.steps, self.secs, self.loss = 0, 0.0, 0.0

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
    """Wall time of one step, synchronised with the device so the figure is the GPU's."""

    def __init__(self, synchronize: Callable[[], None]) -> None:
        self.synchronize = synchronize

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.synchronize()
        self.secs = time.perf_counter() - self.start
