"""PyTorch (CPU, float32) timing of the same Llama forward that `orthoformer eval` runs:
sliding windows of CONTEXT tokens advancing by CONTEXT/2, logits for the newly scored
positions only. Weights come from the same GGUF through gguf_numpy.py (no transformers).
Prints scored tokens per second (best of 3 timed runs after a warm-up) on stderr, and as JSON
on the last line of stdout (`orthoformer bench --model` reads it).

usage: python3 scripts/bench_llama_torch.py [GGUF] [TOKENS=1024] [CONTEXT=256] [THREADS=2]
"""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import gguf_numpy  # noqa: E402


def unpermute(w, n_heads):
    """llama.cpp adjacent-pair rows -> HF rotate-half rows."""
    out_dim, cols = w.shape
    dh = out_dim // n_heads
    return w.reshape(n_heads, dh // 2, 2, cols).swapaxes(1, 2).reshape(out_dim, cols)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    n_tok = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    ctx = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 2)
    _, meta, w, _ = gguf_numpy.load(path)
    L = meta["llama.block_count"]
    nh, nkv = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]
    eps, theta = meta["llama.attention.layer_norm_rms_epsilon"], meta["llama.rope.freq_base"]
    T = {k: torch.tensor(v, dtype=torch.float32) for k, v in w.items()}
    for l in range(L):
        T[f"blk.{l}.attn_q.weight"] = torch.tensor(unpermute(w[f"blk.{l}.attn_q.weight"], nh), dtype=torch.float32)
        T[f"blk.{l}.attn_k.weight"] = torch.tensor(unpermute(w[f"blk.{l}.attn_k.weight"], nkv), dtype=torch.float32)
    emb = T["token_embd.weight"]
    c = emb.shape[1]
    dh = c // nh
    inv = theta ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)

    def rope(x, pos):
        ang = pos[:, None].double() * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1).float()[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1).float()[:, None, :]
        x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def norm(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    @torch.no_grad()
    def forward(ids, start):
        t = ids.shape[0]
        x = emb[ids]
        pos = torch.arange(t)
        for l in range(L):
            p = f"blk.{l}."
            h = norm(x, T[p + "attn_norm.weight"])
            q = rope((h @ T[p + "attn_q.weight"].T).view(t, nh, dh), pos).transpose(0, 1)
            k = rope((h @ T[p + "attn_k.weight"].T).view(t, nkv, dh), pos).transpose(0, 1)
            v = (h @ T[p + "attn_v.weight"].T).view(t, nkv, dh).transpose(0, 1)
            k = k.repeat_interleave(nh // nkv, 0)
            v = v.repeat_interleave(nh // nkv, 0)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.transpose(0, 1).reshape(t, c) @ T[p + "attn_output.weight"].T
            h = norm(x, T[p + "ffn_norm.weight"])
            g = torch.nn.functional.silu(h @ T[p + "ffn_gate.weight"].T) * (h @ T[p + "ffn_up.weight"].T)
            x = x + g @ T[p + "ffn_down.weight"].T
        return norm(x[start:], T["output_norm.weight"]) @ emb.T

    ids = torch.tensor(np.arange(n_tok + 1) * 7919 % 49152)
    best = float("inf")
    for run in range(4):
        t0 = time.perf_counter()
        scored, prev_end, begin = 0, 1, 0
        while True:
            end = min(begin + ctx, len(ids))
            forward(ids[begin:end], prev_end - 1 - begin)
            scored += end - prev_end
            prev_end = end
            if end == len(ids):
                break
            begin += ctx // 2
        if run > 0:  # the first run warms up
            best = min(best, time.perf_counter() - t0)
    dt = best
    print(f"torch {torch.__version__}: {scored} tokens in {dt:.2f} s = {scored / dt:.1f} tokens/s "
          f"(window {ctx}, stride {ctx // 2}, {torch.get_num_threads()} threads)", file=sys.stderr)
    print(json.dumps({"implementation": f"torch {torch.__version__}", "tokens": scored,
                      "seconds": dt, "tokens_per_s": scored / dt, "window": ctx,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
