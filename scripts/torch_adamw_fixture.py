"""Writes tests/fixtures/train/adamw.safetensors: ten torch.optim.AdamW steps (CPU,
single-tensor path) with decoupled weight decay on a 2-D weight only, a changing learning rate
and global-norm gradient clipping, for tests/integration/train_adamw.rs.

Usage: python3 scripts/torch_adamw_fixture.py
"""
import math
import torch
from safetensors.torch import save_file

torch.manual_seed(0)
w = torch.randn(4, 3, requires_grad=True)     # 2-D weight: decays
b = torch.randn(5, requires_grad=True)        # 1-D bias/gain: no decay
out = {"w0": w.detach().clone(), "b0": b.detach().clone()}
opt = torch.optim.AdamW(
    [{"params": [w], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}],
    lr=1e-2, betas=(0.9, 0.95), eps=1e-8, foreach=False)
lrs = []
for step in range(10):
    lr = 1e-2 * (0.5 + 0.5 * math.cos(math.pi * step / 10))
    for g in opt.param_groups:
        g["lr"] = lr
    lrs.append(lr)
    gw = torch.randn(4, 3) * (3.0 if step % 3 == 0 else 0.3)
    gb = torch.randn(5) * (3.0 if step % 3 == 0 else 0.3)
    out[f"gw{step}"], out[f"gb{step}"] = gw.clone(), gb.clone()
    w.grad, b.grad = gw.clone(), gb.clone()
    norm = torch.nn.utils.clip_grad_norm_([w, b], 1.0)
    out[f"norm{step}"] = norm.reshape(1).clone()
    opt.step()
    out[f"w{step + 1}"], out[f"b{step + 1}"] = w.detach().clone(), b.detach().clone()
out["lr"] = torch.tensor(lrs, dtype=torch.float64)
save_file(out, "tests/fixtures/train/adamw.safetensors", metadata={"torch": torch.__version__})
print("wrote tests/fixtures/train/adamw.safetensors with torch", torch.__version__)
