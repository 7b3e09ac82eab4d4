"""Reference forward pass of a Llama GGUF in NumPy (float64), independent of the Rust code:
its own GGUF parser (gguf_numpy.py), llama.cpp's adjacent-pair RoPE on the *permuted* Q/K rows
as stored in the file (the Rust side un-permutes and uses rotate-half RoPE, so agreement also
checks the permutation).

Writes tests/fixtures/llama/reference_logits.json: for a few prompts (token ids), the top-10
logits and the log-sum-exp at a few positions.

usage: python3 scripts/numpy_llama_reference.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import gguf_numpy  # noqa: E402

# Token ids from the Rust tokenizer (tests/integration/llama_tokenizer.rs checks the first two encodings):
# "The capital of France is", "To be, or not to be, that is the question:", and raw ids.
PROMPTS = [
    [504, 3575, 282, 4649, 314],
    [2068, 325, 28, 355, 441, 288, 325, 28, 338, 314, 260, 1962, 42],
    [1, 4093, 198, 26843, 2, 198, 33, 34, 35, 36, 17, 9690, 30000, 49151],
]


def rms_norm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope_adjacent(x, n_heads, dh, theta):
    """llama.cpp 'normal' RoPE: rotate adjacent pairs (2i, 2i+1) of each head."""
    t = x.shape[0]
    x = x.reshape(t, n_heads, dh // 2, 2)
    i = np.arange(dh // 2)
    ang = np.arange(t)[:, None] * theta ** (-2.0 * i / dh)[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0], x[..., 1]
    out = np.stack([a * c - b * s, b * c + a * s], axis=-1)
    return out.reshape(t, n_heads * dh)


def forward(meta, w, ids):
    L = meta["llama.block_count"]
    nh = meta["llama.attention.head_count"]
    nkv = meta["llama.attention.head_count_kv"]
    eps = meta["llama.attention.layer_norm_rms_epsilon"]
    theta = meta["llama.rope.freq_base"]
    x = w["token_embd.weight"][ids]
    t, c = x.shape
    dh = c // nh
    mask = np.triu(np.full((t, t), -np.inf), 1)
    for l in range(L):
        p = f"blk.{l}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = rope_adjacent(h @ w[p + "attn_q.weight"].T, nh, dh, theta).reshape(t, nh, dh)
        k = rope_adjacent(h @ w[p + "attn_k.weight"].T, nkv, dh, theta).reshape(t, nkv, dh)
        v = (h @ w[p + "attn_v.weight"].T).reshape(t, nkv, dh)
        out = np.zeros((t, nh, dh))
        for hh in range(nh):
            g = hh // (nh // nkv)
            s = q[:, hh] @ k[:, g].T / np.sqrt(dh) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            out[:, hh] = s @ v[:, g]
        x = x + out.reshape(t, c) @ w[p + "attn_output.weight"].T
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        gt = h @ w[p + "ffn_gate.weight"].T
        up = h @ w[p + "ffn_up.weight"].T
        x = x + (gt / (1 + np.exp(-gt)) * up) @ w[p + "ffn_down.weight"].T
    h = rms_norm(x, w["output_norm.weight"], eps)
    head = w.get("output.weight", w["token_embd.weight"])
    return h @ head.T


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    _, meta, w, _ = gguf_numpy.load(path)
    cases = []
    for ids in PROMPTS:
        logits = forward(meta, w, np.array(ids))
        positions = sorted({0, len(ids) // 2, len(ids) - 1})
        rows = []
        for pos in positions:
            row = logits[pos]
            top = np.argsort(-row)[:10]
            mx = row.max()
            lse = float(mx + np.log(np.exp(row - mx).sum()))
            rows.append({"pos": pos, "top_ids": [int(i) for i in top],
                         "top_logits": [float(row[i]) for i in top], "logsumexp": lse})
        cases.append({"ids": ids, "positions": rows})
    out = {"model": os.path.basename(path), "dtype": "float64", "cases": cases}
    os.makedirs("tests/fixtures/llama", exist_ok=True)
    with open("tests/fixtures/llama/reference_logits.json", "w") as f:
        json.dump(out, f, indent=1)
    print("wrote tests/fixtures/llama/reference_logits.json")


if __name__ == "__main__":
    main()
