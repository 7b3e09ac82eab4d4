#!/usr/bin/env python3
"""Reads an `orthoformer train` checkpoint folder with NumPy and `safetensors` alone (no
Orthoformer code), as any other tool would, and checks it:

- every file listed in SHA256SUMS has that SHA-256 (state.json included);
- model.safetensors loads with `safetensors.numpy.load_file` and holds every tensor the
  config implies, the frozen W_Q / W_K included, with the metadata keys
  `format`, `config` and, for frozen weights, `frozen_generator` and `frozen_sha256`;
- the frozen tensors hash to `frozen_sha256` (f32 little-endian, in file order of layers,
  Q before K) and every head's block has orthonormal rows (W_h W_h^T = I to 1e-5);
- optimizer.safetensors holds `m` and `v`, one value per trainable parameter.

Usage: pip install safetensors numpy; python3 scripts/check_checkpoint_numpy.py RUN_DIR
Exit status 0 when every check passes, 1 otherwise.
"""

import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file


def main(run: Path) -> int:
    failures = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failures.append(what)

    sums = {}
    for line in (run / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        sums[name] = digest
        got = hashlib.sha256((run / name).read_bytes()).hexdigest()
        check(got == digest, f"SHA256SUMS: {name}")

    model = load_file(str(run / "model.safetensors"))
    with safe_open(str(run / "model.safetensors"), framework="numpy") as f:
        meta = f.metadata()
    cfg = json.loads(meta["config"])
    check(meta.get("format") == "orthoformer-gpt-1", "model metadata format")
    c, h, layers = cfg["d_model"], cfg["n_head"], cfg["n_layer"]
    frozen = [n for n in model if re.fullmatch(r"h\.\d+\.attn\.[qk]\.weight", n)
              and "frozen_generator" in meta and n not in trainable_names(cfg)]
    print(f"model: {len(model)} tensors, {sum(t.size for t in model.values())} values; "
          f"attention {cfg['attention']}, frozen tensors {len(frozen)}")
    if cfg["attention"].startswith("orthogonal"):
        check(len(frozen) > 0 and "frozen_sha256" in meta, "frozen W_Q/W_K stored with their hash")
        digest = hashlib.sha256()
        for n in sorted(frozen, key=lambda n: (int(n.split(".")[1]), n.split(".")[3] == "k")):
            w = model[n]
            check(w.shape == (c, c) and w.dtype == np.float32, f"{n} is f32 {c}x{c}")
            digest.update(w.astype("<f4").tobytes())
            d = c // h
            for head in range(h):
                block = w[head * d:(head + 1) * d].astype(np.float64)
                err = np.abs(block @ block.T - np.eye(d)).max()
                check(err < 1e-5, f"{n} head {head}: orthonormal rows (max error {err:.1e})")
        check(digest.hexdigest() == meta["frozen_sha256"], "frozen tensors match frozen_sha256")

    opt = load_file(str(run / "optimizer.safetensors"))
    n_trainable = sum(t.size for n, t in model.items() if n not in frozen)
    check(set(opt) == {"m", "v"} and opt["m"].size == n_trainable == opt["v"].size,
          f"optimizer m, v of {n_trainable} values")
    print("all checks passed" if not failures else f"{len(failures)} checks failed")
    return 0 if not failures else 1


def trainable_names(cfg):
    """Q/K names that are trained (softmax Q and K; identity-q's K) rather than frozen."""
    att = cfg["attention"]
    names = set()
    for l in range(cfg["n_layer"]):
        if att in ("softmax", "linear"):
            names |= {f"h.{l}.attn.q.weight", f"h.{l}.attn.k.weight"}
        if att == "identity-q":
            names.add(f"h.{l}.attn.k.weight")
    return names


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
