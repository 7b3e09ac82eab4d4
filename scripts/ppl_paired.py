"""Per-window losses from llama-perplexity logs, and paired intervals between files.

llama-perplexity prints the running perplexity after each chunk ("[1]41.2,[2]43.9,..."), each
chunk scoring the same number of tokens (the second half of a window of -c tokens), so chunk
i's mean loss is i·ln(ppl_i) − (i−1)·ln(ppl_{i−1}) nats per token (to the 4 printed decimals:
about 1e-4·i/ppl nats, far below the differences read here). Two files scored on the same text
and context see the same chunks, so their per-chunk differences are paired.

usage: python3 scripts/ppl_paired.py BASELINE.log FILE.log [FILE.log ...] [--json]
  prints, for each FILE against BASELINE: chunks, perplexity, mean per-chunk difference in
  nats per token with its 95% t interval, and the share of chunks where FILE is better.
"""

import json
import math
import re
import sys


def chunk_losses(path):
    """Mean loss (nats per token) of each chunk, from a llama-perplexity log."""
    text = open(path, encoding="utf-8", errors="replace").read()
    running = [float(x) for x in re.findall(r"\[(?:\d+)\]([0-9]+\.[0-9]+)", text)]
    if not running:
        sys.exit(f"{path}: no per-chunk perplexities (did llama-perplexity run?)")
    out, prev = [], 0.0
    for i, p in enumerate(running, start=1):
        total = i * math.log(p)
        out.append(total - prev)
        prev = total
    return out


# Two-sided 95% quantiles of Student's t for n−1 = 1..30 degrees of freedom, then the normal's.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def paired(base, other):
    n = min(len(base), len(other))
    if n < 2:
        sys.exit("need at least 2 chunks in common")
    d = [o - b for b, o in zip(base[:n], other[:n])]
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    t = T95[n - 2] if n - 1 <= len(T95) else 1.96
    half = t * sd / math.sqrt(n)
    return {
        "chunks": n,
        "ppl": math.exp(sum(other[:n]) / n),
        "ppl_baseline": math.exp(sum(base[:n]) / n),
        "diff_nats": mean,
        "ci95": [mean - half, mean + half],
        "better_share": sum(x < 0 for x in d) / n,
    }


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    if len(args) < 2:
        sys.exit(__doc__)
    base = chunk_losses(args[0])
    rows = {p: paired(base, chunk_losses(p)) for p in args[1:]}
    if "--json" in sys.argv:
        print(json.dumps({"baseline": args[0], "files": rows}, indent=1))
        return
    print(f"baseline {args[0]}: ppl {rows[args[1]]['ppl_baseline']:.3f}")
    for p, r in rows.items():
        lo, hi = r["ci95"]
        print(f"{p}: ppl {r['ppl']:.3f}, Δ {r['diff_nats']:+.4f} nats/token "
              f"[{lo:+.4f}, {hi:+.4f}] over {r['chunks']} chunks, better in {r['better_share']:.0%}")


if __name__ == "__main__":
    main()
