"""Times torch.nn.init.orthogonal_, torch.linalg.qr and torch.linalg.svd on the shapes given,
for `orthoformer init-bench --torch`. Prints one JSON object on stdout:
{"torch": version, "threads": n, "shapes": [{"rows", "cols", "orthogonal_ms", "qr_ms", "svd_ms",
"orthogonal_f64_ms"}]}
Times are medians over --runs runs after one warm-up; --dtype float32 by default, the dtype of
an nn.Linear weight (orthogonal_ computes in that dtype). `orthogonal_f64_ms` is orthogonal_ on
a float64 tensor whatever --dtype says: the accuracy Orthoformer's generators compute at.
"""
import argparse
import json
import statistics
import sys
import time


def median_ms(fn, runs):
    fn()  # warm-up
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", action="append", required=True, help="MxN")
    p.add_argument("--runs", type=int, default=25)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = p.parse_args()
    try:
        import torch
    except ImportError:
        print(json.dumps({"error": "torch is not installed: pip install torch"}))
        return 3
    dtype = getattr(torch, args.dtype)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "dtype": args.dtype, "shapes": []}
    for s in args.shape:
        m, n = (int(x) for x in s.lower().split("x"))
        w = torch.empty(m, n, dtype=dtype)
        g = torch.randn(m, n, dtype=dtype)
        orthogonal_ms = median_ms(lambda: torch.nn.init.orthogonal_(w), args.runs)
        if dtype == torch.float64:
            orthogonal_f64_ms = orthogonal_ms  # the same work: timed once
        else:
            w64 = torch.empty(m, n, dtype=torch.float64)
            orthogonal_f64_ms = median_ms(lambda: torch.nn.init.orthogonal_(w64), args.runs)
        out["shapes"].append({
            "rows": m,
            "cols": n,
            "orthogonal_ms": orthogonal_ms,
            "qr_ms": median_ms(lambda: torch.linalg.qr(g), args.runs),
            "svd_ms": median_ms(lambda: torch.linalg.svd(g, full_matrices=False), args.runs),
            "orthogonal_f64_ms": orthogonal_f64_ms,
        })
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
