#!/usr/bin/env bash
# GPT-2 small (python/recipes/gpt2-small.json) on one GPU: softmax vs orthogonal vs
# orthogonal-hadamard attention, bf16 autocast + torch.compile, a fixed number of steps of
# 4 micro-steps of 12 rows x 1024 tokens (49,152 tokens per step) on random token ids (a token folder made here with NumPy: no
# network, no tokenizer download). Prints and writes a table of tokens/s, ms/step and MFU
# (the last --log-every window of 5 steps, after compilation) and the peak GPU memory.
# Needs only torch, numpy and the package (its native module built); about 1 min per variant
# on an H100 (most of it start-up and compilation).
# Usage (repository root): bash python/bench/gpu.sh [OUT_DIR] [STEPS]
#   OUT_DIR (default $OUT, else ./gpu-bench) receives gpu.json and gpu.md.
set -euo pipefail
out=${1:-${OUT:-gpu-bench}}
steps=${2:-30}
py=${PYTHON:-python3}
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" - "$work/data" <<'PY'
import pathlib, sys
import numpy as np
from orthoformer.tokens import write_meta
d = pathlib.Path(sys.argv[1]); d.mkdir()
rng = np.random.default_rng(0)
for split, n in (("train", 8_000_000), ("val", 400_000)):
    rng.integers(0, 50257, size=n, dtype=np.uint16).tofile(d / f"{split}.bin")
write_meta(d, 50257, {"kind": "ids"}, source="random ids (python/bench/gpu.sh)")
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt" || true
for attn in softmax orthogonal orthogonal-hadamard; do
  "$py" -m orthoformer.train --data-dir "$work/data" --config python/recipes/gpt2-small.json \
    --attention "$attn" --batch 12 --grad-accum 4 --steps "$steps" --warmup 5 --lr 6e-4 \
    --eval-every "$steps" --eval-iters 1 --dtype bf16 --compile on --log-every 5 --json --out "$work/run-$attn" \
    > "$out/$attn.json" 2> "$out/$attn.log"
  rm -rf "$work/run-$attn"
  tail -n 2 "$out/$attn.log"
done
"$py" - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
rows = []
for attn in ("softmax", "orthogonal", "orthogonal-hadamard"):
    s = json.loads((out / f"{attn}.json").read_text())
    p = s["progress"] or {}
    rows.append({"attention": attn, "tokens_per_s": p.get("tokens_per_s"), "ms_per_step": p.get("ms_per_step"),
                 "mfu": p.get("mfu"), "peak_gpu_bytes": s.get("peak_cuda_bytes"), "loss": p.get("loss"),
                 "device": s.get("device_name"), "dtype": s["dtype"], "compile": s["compile"]})
(out / "gpu.json").write_text(json.dumps(rows, indent=2) + "\n")
lines = ["| attention | tokens/s | ms/step | MFU | peak GPU memory | loss (last window) |", "|---|---:|---:|---:|---:|---:|"]
for r in rows:
    mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "n/a"
    mem = f"{r['peak_gpu_bytes'] / 2**30:.2f} GiB" if r["peak_gpu_bytes"] else "n/a"
    lines.append(f"| {r['attention']} | {r['tokens_per_s']:,.0f} | {r['ms_per_step']:.1f} | {mfu} | {mem} | {r['loss']:.3f} |")
head = f"GPT-2 small, 4 x 12 rows x 1024 tokens per step, bf16 + compile, on {rows[0]['device']}"
(out / "gpu.md").write_text(head + "\n\n" + "\n".join(lines) + "\n")
print(head); print("\n".join(lines))
PY
