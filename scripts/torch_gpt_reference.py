#!/usr/bin/env python3
"""PyTorch oracle for the Orthoformer GPT.

Builds the `tiny` GPT in PyTorch (float64) for each attention variant and norm placement,
with random non-trivial weights, and writes `tests/fixtures/gpt/<attention>_<norm>.safetensors`:
  param.<name>   every trainable tensor (Orthoformer names, PyTorch layout out x in)
  frozen.<name>  frozen W_Q, W_K (orthogonal variants; per head Q from torch QR, transposed)
  inputs, targets (int64, B x T), logits (B, T, V), loss (scalar),
  grad.<name>    gradient of the mean cross-entropy for every trainable tensor,
  adamw.<name>   the parameters after 10 torch.optim.AdamW steps on the same batch
                 (lr 1e-2, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on 2-D tensors only).
Metadata: config (JSON, Orthoformer's GptConfig), and the AdamW hyper-parameters.
Also `<attention>-rope_<norm>.safetensors`: the same with rotary positions (`position` rope:
no wpe; Hugging Face's half-split RoPE, theta 10,000, on q and k after their projections,
before the linear kernels' feature map); `-temp`: a learned per-head temperature multiplying
the softmax scores (`h.<l>.attn.temperature`, n_head values); `-rope-temp`: both.
Usage: python3 scripts/torch_gpt_reference.py [OUT_DIR]
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

B, T = 2, 8
TINY = dict(vocab_size=11, context=8, n_layer=2, n_head=2, d_model=8, d_ff=32,
            attn_bias=True, ffn_bias=True, dropout=0.0, frozen_method="qr", frozen_seed=0)
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, steps=10)
EPS_LIN = 1e-6
KINDS = ["softmax", "orthogonal", "linear", "orthogonal-linear"]
NORMS = ["pre", "post"]


def tensor_table(cfg, frozen_qk):
    """(name, shape) of trainable tensors in Orthoformer's store order."""
    c, f, v, t = cfg["d_model"], cfg["d_ff"], cfg["vocab_size"], cfg["context"]
    out = [("wte", (v, c))]
    if cfg.get("position", "learned") == "learned":
        out.append(("wpe", (t, c)))
    for l in range(cfg["n_layer"]):
        p = f"h.{l}"
        out += [(f"{p}.ln1.weight", (c,)), (f"{p}.ln1.bias", (c,))]
        for n in "qkvo":
            if not (frozen_qk and n in "qk"):
                out.append((f"{p}.attn.{n}.weight", (c, c)))
            if cfg["attn_bias"]:
                out.append((f"{p}.attn.{n}.bias", (c,)))
        if cfg.get("temperature") == "learned":
            out.append((f"{p}.attn.temperature", (cfg["n_head"],)))
        out += [(f"{p}.ln2.weight", (c,)), (f"{p}.ln2.bias", (c,))]
        out.append((f"{p}.mlp.fc.weight", (f, c)))
        if cfg["ffn_bias"]:
            out.append((f"{p}.mlp.fc.bias", (f,)))
        out.append((f"{p}.mlp.proj.weight", (c, f)))
        if cfg["ffn_bias"]:
            out.append((f"{p}.mlp.proj.bias", (c,)))
    out += [("ln_f.weight", (c,)), ("ln_f.bias", (c,))]
    return out


def init_params(cfg, frozen_qk, gen):
    params = {}
    for name, shape in tensor_table(cfg, frozen_qk):
        if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "ln_f.weight":
            x = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("attn.temperature"):
            x = 1.0 + 0.3 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif len(shape) == 1:
            x = 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            x = 0.3 * torch.randn(shape, generator=gen, dtype=torch.float64)
        params[name] = x.requires_grad_(True)
    frozen = {}
    if frozen_qk:
        c, h = cfg["d_model"], cfg["n_head"]
        d = c // h
        for l in range(cfg["n_layer"]):
            for n in "qk":
                w = torch.zeros(c, c, dtype=torch.float64)
                for hi in range(h):
                    q, r = torch.linalg.qr(torch.randn(c, d, generator=gen, dtype=torch.float64))
                    q = q * torch.sign(torch.diagonal(r))  # sign fix: Haar
                    w[hi * d:(hi + 1) * d, :] = q.T
                frozen[f"h.{l}.attn.{n}.weight"] = w
    return params, frozen


def attention(x, p, fz, l, cfg, kind):
    b, t, c = x.shape
    h = cfg["n_head"]
    d = c // h

    def proj(n):
        w = fz.get(f"h.{l}.attn.{n}.weight", p.get(f"h.{l}.attn.{n}.weight"))
        return F.linear(x, w, p.get(f"h.{l}.attn.{n}.bias")).view(b, t, h, d).transpose(1, 2)

    q, k, v = proj("q"), proj("k"), proj("v")
    if cfg.get("position") == "rope":
        q, k = rope(q), rope(k)
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
    if kind in ("softmax", "orthogonal"):
        s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        if f"h.{l}.attn.temperature" in p:
            s = s * p[f"h.{l}.attn.temperature"].view(1, h, 1, 1)
        s = s.masked_fill(~mask, float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
    else:
        fq, fk = F.elu(q) + 1, F.elu(k) + 1
        a = (fq @ fk.transpose(-1, -2)) * mask
        y = (a @ v) / (a.sum(-1, keepdim=True) + EPS_LIN)
    y = y.transpose(1, 2).reshape(b, t, c)
    return F.linear(y, p[f"h.{l}.attn.o.weight"], p.get(f"h.{l}.attn.o.bias"))


def rope(x, theta=10_000.0):
    """Hugging Face's rotary embedding (pairs (i, i + D/2)) of x (B, H, T, D)."""
    t, d = x.shape[-2], x.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def mlp(x, p, l):
    hid = F.linear(x, p[f"h.{l}.mlp.fc.weight"], p.get(f"h.{l}.mlp.fc.bias"))
    return F.linear(F.gelu(hid, approximate="tanh"), p[f"h.{l}.mlp.proj.weight"], p.get(f"h.{l}.mlp.proj.bias"))


def ln(x, p, name):
    return F.layer_norm(x, (x.shape[-1],), p[f"{name}.weight"], p[f"{name}.bias"], eps=1e-5)


def forward(p, fz, inputs, cfg, kind, norm):
    t = inputs.shape[1]
    x = p["wte"][inputs] + (p["wpe"][:t] if "wpe" in p else 0.0)
    for l in range(cfg["n_layer"]):
        if norm == "pre":
            x = x + attention(ln(x, p, f"h.{l}.ln1"), p, fz, l, cfg, kind)
            x = x + mlp(ln(x, p, f"h.{l}.ln2"), p, l)
        else:
            x = ln(x + attention(x, p, fz, l, cfg, kind), p, f"h.{l}.ln1")
            x = ln(x + mlp(x, p, l), p, f"h.{l}.ln2")
    return ln(x, p, "ln_f") @ p["wte"].T


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/gpt"
    os.makedirs(out_dir, exist_ok=True)
    cases = [(kind, norm, None) for kind in KINDS for norm in NORMS]
    cases += [(kind, "pre", "rope") for kind in KINDS] + [("orthogonal", "post", "rope")]
    cases += [("orthogonal", "pre", "temp"), ("softmax", "post", "temp"), ("orthogonal", "pre", "rope-temp")]
    for kind, norm, position in cases:
        vi, ni = KINDS.index(kind), NORMS.index(norm)
        if True:
            cfg = dict(TINY, attention=kind, norm=norm)
            seed = 1000 + 10 * vi + ni
            if position:
                seed += {"rope": 500, "temp": 600, "rope-temp": 700}[position]
                if "rope" in position:
                    cfg["position"] = "rope"
                if "temp" in position:
                    cfg["temperature"] = "learned"
            frozen_qk = kind.startswith("orthogonal")
            gen = torch.Generator().manual_seed(seed)
            p, fz = init_params(cfg, frozen_qk, gen)
            inputs = torch.randint(0, cfg["vocab_size"], (B, T), generator=gen)
            targets = torch.randint(0, cfg["vocab_size"], (B, T), generator=gen)
            logits = forward(p, fz, inputs, cfg, kind, norm)
            loss = F.cross_entropy(logits.reshape(-1, cfg["vocab_size"]), targets.reshape(-1))
            loss.backward()
            tensors = {"inputs": inputs, "targets": targets,
                       "logits": logits.detach().float(), "loss": loss.detach().float().reshape(1)}
            for n, x in p.items():
                tensors[f"param.{n}"] = x.detach().float().clone()
                tensors[f"grad.{n}"] = x.grad.detach().float().clone()
            for n, x in fz.items():
                tensors[f"frozen.{n}"] = x.float()
            # AdamW from the float32-rounded parameters, in float64.
            q = {n: x.detach().float().double().requires_grad_(True) for n, x in p.items()}
            fz32 = {n: x.float().double() for n, x in fz.items()}
            decay = [x for x in q.values() if x.dim() == 2]
            no_decay = [x for x in q.values() if x.dim() != 2]
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]},
                                     {"params": no_decay, "weight_decay": 0.0}],
                                    lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
            for _ in range(ADAMW["steps"]):
                opt.zero_grad()
                lg = forward(q, fz32, inputs, cfg, kind, norm)
                F.cross_entropy(lg.reshape(-1, cfg["vocab_size"]), targets.reshape(-1)).backward()
                opt.step()
            for n, x in q.items():
                tensors[f"adamw.{n}"] = x.detach().float().clone()
            meta = {"config": json.dumps(cfg), "adamw": json.dumps(ADAMW),
                    "trainable": str(sum(x.numel() for x in p.values())),
                    "frozen": str(sum(x.numel() for x in fz.values())),
                    "torch": torch.__version__}
            name = f"{kind}-{position}" if position else kind
            path = os.path.join(out_dir, f"{name}_{norm}.safetensors")
            save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata=meta)
            print(f"{path}: loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
