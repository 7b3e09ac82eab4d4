"""Training throughput of ``python -m orthoformer.train`` against nanoGPT's ``train.py`` on the
same model, the same data and the same micro-batch, in one invocation: tokens/s, ms/step and
MFU of both, and their ratio.

The model is nanoGPT's GPT-2 small (12 layers, 12 heads, width 768, context 1024, no biases,
no dropout, exact GELU: ``python/recipes/gpt2-small.json``) or, for a CPU smoke run, a tiny
one of the same shape (``--size tiny``). The data are random GPT-2 ids (vocabulary 50257)
written once in nanoGPT's format (``train.bin``/``val.bin``, uint16), which is also a token
folder here (an ids-only ``meta.json`` beside them). nanoGPT is not shipped: ``--nanogpt``
names a checkout of karpathy/nanoGPT (unchanged; it pads the vocabulary to 50304 as this
trainer's head does). Each tool runs ``--steps`` optimizer steps of one micro-batch; the
first ``--skip`` steps (compilation, warm-up) are left out, and each figure is the median
over the rest (this trainer's log intervals of ``--log-every`` steps, nanoGPT's per-step
times). MFU is computed here for both from the same FLOPs per token (the library's exact
count, ``orthoformer params``) over the same peak (``--peak-tflops``, else the GPU's data
sheet figure; none on the CPU), so it is the tokens/s ratio in another unit.

    python python/bench/bench_nanogpt.py --nanogpt bench-peers/nanoGPT                 # GPU
    python python/bench/bench_nanogpt.py --nanogpt bench-peers/nanoGPT --size tiny \\
        --device cpu --steps 8 --skip 2 --log-every 2                                  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
from typing import Optional

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
VOCAB = 50257
SIZES = {
    "gpt2-small": {"n_layer": 12, "n_head": 12, "d_model": 768, "context": 1024, "batch": 32},
    "tiny": {"n_layer": 2, "n_head": 2, "d_model": 64, "context": 64, "batch": 4},
}


def write_data(folder: pathlib.Path, tokens: int) -> None:
    """Random ids as nanoGPT's ``train.bin``/``val.bin`` and an ids-only token folder."""
    from orthoformer.tokens import write_meta

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", tokens), ("val", max(tokens // 10, 1 << 12))):
        rng.integers(0, VOCAB, n, dtype=np.uint16).tofile(folder / f"{split}.bin")
    write_meta(folder, VOCAB, {"kind": "ids"})


def run(cmd: list[str], cwd: pathlib.Path, log: pathlib.Path) -> str:
    """Runs ``cmd``, its output kept in ``log``; a failure shows the output's tail."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    log.write_text(p.stdout + "\n--- stderr ---\n" + p.stderr)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed ({p.returncode}); see {log}:\n{p.stderr[-3000:]}")
    return p.stdout + p.stderr


def ours(args: argparse.Namespace, size: dict, work: pathlib.Path, data: pathlib.Path) -> float:
    """Median seconds per step of ``python -m orthoformer.train``."""
    cfg = json.loads((REPO / "python" / "recipes" / "gpt2-small.json").read_text())
    cfg.update({k: size[k] for k in ("n_layer", "n_head", "d_model", "context")}, d_ff=4 * size["d_model"])
    (work / "model.json").write_text(json.dumps(cfg))
    cmd = [sys.executable, "-m", "orthoformer.train", "--config", str(work / "model.json")]
    cmd += ["--data-dir", str(data), "--batch", str(args.batch), "--steps", str(args.steps)]
    cmd += ["--eval-every", str(args.steps), "--eval-iters", "1", "--log-every", str(args.log_every)]
    cmd += ["--device", args.device, "--dtype", args.dtype, "--compile", args.compile]
    cmd += ["--out", str(work / "orthoformer-run")]
    out = run(cmd, REPO, work / "orthoformer.log")
    times = []
    for m in re.finditer(r"^step\s+(\d+)\s+loss .*?([\d.]+) ms/step", out, re.M):
        if int(m.group(1)) - args.log_every >= args.skip:  # the line's interval after the skip
            times.append(float(m.group(2)) / 1e3)
    if not times:
        sys.exit(f"no progress lines after step {args.skip} in {work / 'orthoformer.log'}")
    return statistics.median(times)


def nanogpt(args: argparse.Namespace, size: dict, work: pathlib.Path, data: pathlib.Path) -> float:
    """Median seconds per step of nanoGPT's ``train.py`` (run from its checkout, which its
    configurator needs as the working directory)."""
    dtype = {"bf16": "bfloat16", "fp32": "float32", "fp16": "float16"}[args.dtype]
    cmd = [sys.executable, "train.py", f"--dataset={data}", f"--out_dir={work / 'nanogpt-run'}"]
    cmd += [f"--n_layer={size['n_layer']}", f"--n_head={size['n_head']}", f"--n_embd={size['d_model']}"]
    cmd += [
        f"--block_size={size['context']}",
        f"--batch_size={args.batch}",
        "--gradient_accumulation_steps=1",
    ]
    cmd += ["--bias=False", "--dropout=0.0", f"--max_iters={args.steps - 1}", "--eval_iters=1"]
    cmd += [f"--eval_interval={args.steps * 10}", "--log_interval=1", f"--device={args.device}"]
    cmd += [f"--dtype={dtype}", f"--compile={args.compile == 'on'}", "--always_save_checkpoint=False"]
    out = run(cmd, args.nanogpt, work / "nanogpt.log")
    times = [
        float(m.group(2)) / 1e3
        for m in re.finditer(r"^iter (\d+): loss [\d.]+, time ([\d.]+)ms", out, re.M)
        if int(m.group(1)) >= args.skip
    ]
    if not times:
        sys.exit(f"no iteration lines after {args.skip} in {work / 'nanogpt.log'}")
    return statistics.median(times)


def peak(args: argparse.Namespace) -> Optional[float]:
    """Peak FLOP/s of the device for MFU (as the trainer finds it)."""
    import torch

    from orthoformer.torch import precision

    speed = precision.resolve(torch.device(args.device), args.dtype, args.compile)
    return precision.peak_flops(speed, args.peak_tflops)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nanogpt", required=True, type=pathlib.Path, help="a checkout of karpathy/nanoGPT")
    p.add_argument("--size", choices=sorted(SIZES), default="gpt2-small")
    p.add_argument("--batch", type=int, help="micro-batch rows [default: 32 for gpt2-small, 4 for tiny]")
    p.add_argument("--steps", type=int, default=60, help="optimizer steps per tool [default: 60]")
    p.add_argument("--skip", type=int, default=20, help="first steps left out of the timing [default: 20]")
    p.add_argument("--log-every", type=int, default=5, help="this trainer's log interval [default: 5]")
    p.add_argument("--device", default="cuda", help="cuda or cpu [default: cuda]")
    p.add_argument("--dtype", help="bf16, fp16 or fp32 [default: bf16 on CUDA, fp32 on the CPU]")
    p.add_argument("--compile", help="on or off [default: on with CUDA]")
    p.add_argument("--peak-tflops", type=float, help="the device's peak for MFU [default: its data sheet]")
    p.add_argument(
        "--work", type=pathlib.Path, help="folder for data, runs and logs [default: a temporary one]"
    )
    args = p.parse_args()
    if not (args.nanogpt / "train.py").is_file():
        sys.exit(f"--nanogpt {args.nanogpt}: no train.py there (a checkout of karpathy/nanoGPT)")
    args.nanogpt = args.nanogpt.resolve()
    cuda = args.device.startswith("cuda")
    args.dtype = args.dtype or ("bf16" if cuda else "fp32")
    args.compile = args.compile or ("on" if cuda else "off")
    size = SIZES[args.size]
    args.batch = args.batch or size["batch"]
    if args.skip >= args.steps:
        sys.exit(f"--skip {args.skip} leaves no step of --steps {args.steps} to time")
    work = (args.work or pathlib.Path(tempfile.mkdtemp(prefix="bench-nanogpt-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    write_data(data, max(1 << 20, 4 * args.batch * size["context"]))
    times = {"orthoformer": ours(args, size, work, data), "nanoGPT": nanogpt(args, size, work, data)}

    from orthoformer.config import GPTConfig
    from orthoformer.torch.progress import flops_per_token

    cfg = GPTConfig.from_json((work / "model.json").read_text())
    flops, top = flops_per_token(cfg), peak(args)
    tokens = args.batch * size["context"]
    print(
        f"{args.size}, micro-batch {args.batch} x {size['context']}, {args.device}, {args.dtype}, "
        f"compile {args.compile}; median of steps {args.skip + 1}..{args.steps}; logs in {work}"
    )
    print(f"{'tool':<12} {'tokens/s':>12} {'ms/step':>9} {'MFU':>7}")
    for tool, secs in times.items():
        mfu = f"{100 * tokens / secs * flops / top:6.1f}%" if top else "    n/a"
        print(f"{tool:<12} {tokens / secs:>12,.0f} {secs * 1e3:>9.1f} {mfu}")
    print(f"ratio orthoformer / nanoGPT (tokens/s): {times['nanoGPT'] / times['orthoformer']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
