"""Host memory of building the trainer (``orthoformer.torch.trainer.Trainer``) for one rank on
the CPU: the rise of peak resident memory (VmHWM, reset where the kernel allows) while a run
is opened and the trainer builds its model and optimizer, against the bytes the model's
trainable tensors hold. A small trainer is built first in the same process, so imports and
first-use allocations (about 80 MiB, whatever the model) do not count as the model's. The
run is a token folder of random GPT-2 ids (vocabulary 50257) and the model the
``gpt2-small`` recipe's, fresh or resumed:

    PYTHONPATH=python python python/bench/trainer_memory.py [--resume] [--config FILE]

It prints one JSON line: ``rise_MiB``, ``model_MiB`` and their ratio (the issue's target:
at most 1.3 for a fresh run).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


def hwm_bytes() -> int:
    """Peak resident memory of this process so far (VmHWM)."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status (Linux only)")


def reset_hwm() -> bool:
    """Resets VmHWM to the current resident size (Linux 4.0+), so import-time peaks do not
    hide the rise; whether it worked."""
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def token_folder(path: pathlib.Path, vocab: int = 50257, tokens: int = 1 << 16) -> None:
    """Random ids in ``train.bin``/``val.bin`` (uint16) with an ids-only ``meta.json``."""
    from orthoformer.tokens import write_meta

    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        rng.integers(0, vocab, tokens, dtype=np.uint16).tofile(path / f"{split}.bin")
    write_meta(path, vocab, {"kind": "ids"})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(HERE.parent / "recipes" / "gpt2-small.json"))
    p.add_argument("--resume", action="store_true", help="measure resuming a checkpoint of the model")
    args = p.parse_args()
    import torch

    from orthoformer import _native
    from orthoformer.data import DEFAULTS
    from orthoformer.torch import distributed, precision
    from orthoformer.torch.runs import TokenRun
    from orthoformer.torch.trainer import Trainer

    torch.set_num_threads(1)
    tmp = pathlib.Path(tempfile.mkdtemp())
    token_folder(tmp / "data")
    config = pathlib.Path(args.config).read_text()
    options = json.loads(json.dumps(DEFAULTS["options"]))
    options.update(batch=1, steps=1, eval_every=1, eval_iters=1)
    options = json.loads(_native.options_check(json.dumps(options)))
    world = distributed.setup("cpu")
    speed = precision.resolve(world.device, "fp32", "off")
    out = tmp / "run"
    small = json.loads(config)
    small.update(n_layer=1, d_model=64, d_ff=256, n_head=1, context=64)
    Trainer(TokenRun.fresh(tmp / "warm", str(tmp / "data"), json.dumps(small), options, 0), world, speed)
    if args.resume:
        # A checkpoint to resume, written in another process so its peaks do not count here.
        import subprocess

        code = (
            "import json,sys,pathlib; from orthoformer.torch.runs import TokenRun; "
            "from orthoformer.torch.trainer import Trainer; "
            "from orthoformer.torch import distributed, precision; "
            "w=distributed.setup('cpu'); s=precision.resolve(w.device,'fp32','off'); "
            "r=TokenRun.fresh(pathlib.Path(sys.argv[1]),sys.argv[2],sys.argv[3],json.loads(sys.argv[4]),0); "
            "Trainer(r,w,s).run_loop()"
        )
        subprocess.run(
            [sys.executable, "-c", code, str(out), str(tmp / "data"), config, json.dumps(options)], check=True
        )
    reset = reset_hwm()
    base = hwm_bytes()
    if args.resume:
        run = TokenRun.resume(out, None, None)
    else:
        run = TokenRun.fresh(out, str(tmp / "data"), config, options, 0)
    trainer = Trainer(run, world, speed)
    rise = hwm_bytes() - base
    model = sum(p.numel() * p.element_size() for p in trainer.model.parameters())
    mib = 2**20
    print(
        json.dumps(
            {
                "resume": args.resume,
                "rise_MiB": round(rise / mib),
                "model_MiB": round(model / mib),
                "ratio": round(rise / model, 2),
                "hwm_reset": reset,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
