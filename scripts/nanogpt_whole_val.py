"""nanoGPT's checkpoint scored the way `orthoformer compare` scores its final loss: the mean
cross-entropy over every non-overlapping window of `block_size` tokens of the validation split
and the shorter last one, so every token after the first (`infer::eval`), next to nanoGPT's own estimate (the mean over `eval_iters` random batches,
as `train.py`'s `estimate_loss`), for docs/RESULTS.md.

Usage (from a nanoGPT checkout whose `data/shakespeare_char` is prepared):
    python3 scripts/nanogpt_whole_val.py --nanogpt /tmp/nanogpt --ckpt out-seed1337/ckpt.pt [--resample 100]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument("--nanogpt", required=True, help="nanoGPT checkout (for model.py and data/)")
p.add_argument("--ckpt", required=True, help="ckpt.pt written by nanoGPT's train.py")
p.add_argument("--batch", type=int, default=12)
p.add_argument("--resample", type=int, default=0,
               help="also draw this many independent 20-batch estimates (nanoGPT's "
                    "estimate_loss with eval_iters=20) and report their mean and sd")
p.add_argument("--eval-iters", type=int, default=20)
a = p.parse_args()

sys.path.insert(0, a.nanogpt)
from model import GPT, GPTConfig  # noqa: E402

ck = torch.load(a.ckpt, map_location="cpu", weights_only=False)
model = GPT(GPTConfig(**ck["model_args"]))
model.load_state_dict(ck["model"])
model.eval()
t = ck["model_args"]["block_size"]
val = np.memmap(os.path.join(a.nanogpt, "data/shakespeare_char/val.bin"), dtype=np.uint16, mode="r")
val = torch.from_numpy(val.astype(np.int64))
windows = (len(val) - 1) // t
total, scored = 0.0, 0
with torch.no_grad():
    for start in range(0, windows, a.batch):
        idx = range(start, min(start + a.batch, windows))
        x = torch.stack([val[w * t : w * t + t] for w in idx])
        y = torch.stack([val[w * t + 1 : w * t + t + 1] for w in idx])
        _, loss = model(x, y)
        total += loss.item() * x.numel()
        scored += x.numel()
    tail = len(val) - 1 - windows * t
    if tail:
        x, y = val[windows * t : windows * t + tail], val[windows * t + 1 :]
        _, loss = model(x[None], y[None])
        total += loss.item() * tail
        scored += tail
result = {
    "ckpt": a.ckpt,
    "iter_num": ck["iter_num"],
    "estimate_val_loss": float(ck["best_val_loss"]),
    "whole_val_loss": total / scored,
    "whole_val_tokens": scored,
}
if a.resample:
    # train.py's get_batch('val') + estimate_loss, repeated with a fixed generator.
    g = torch.Generator().manual_seed(0)
    ests = []
    with torch.no_grad():
        for _ in range(a.resample):
            losses = []
            for _ in range(a.eval_iters):
                ix = torch.randint(len(val) - t, (a.batch,), generator=g)
                x = torch.stack([val[i : i + t] for i in ix])
                y = torch.stack([val[i + 1 : i + 1 + t] for i in ix])
                losses.append(model(x, y)[1].item())
            ests.append(sum(losses) / len(losses))
    m = sum(ests) / len(ests)
    sd = (sum((e - m) ** 2 for e in ests) / (len(ests) - 1)) ** 0.5
    result.update({"resample": a.resample, "estimate_mean": m, "estimate_sd": sd})
print(json.dumps(result))
