#!/usr/bin/env python3
"""Writes ``fixtures/init_cli.npz``: matrices made by the command line (``orthoformer init
... --out x.npy``), pinned so ``test_init.py`` checks the package against them even where the
binary is not built. Usage: python3 python/tests/make_init_fixture.py [ORTHOFORMER_BIN]"""

import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
# (key, CLI arguments): one case per method, awkward shapes, gains, seeds and both dtypes.
CASES = [
    ("qr_7x3_s5_g1.5", ["--method", "qr", "--rows", "7", "--cols", "3", "--seed", "5", "--gain", "1.5"]),
    ("qr_3x7_s1", ["--method", "qr", "--rows", "3", "--cols", "7", "--seed", "1"]),
    ("svd_6x6_s2", ["--method", "svd", "--rows", "6", "--cols", "6", "--seed", "2"]),
    (
        "householder_9x4_s3_f64",
        ["--method", "householder", "--rows", "9", "--cols", "4", "--seed", "3", "--dtype", "f64"],
    ),
    ("cayley_5x2_s4", ["--method", "cayley", "--rows", "5", "--cols", "2", "--seed", "4"]),
    ("kaiming-uniform_4x3x3_s9", ["--method", "kaiming-uniform", "--shape", "4,3,3", "--seed", "9"]),
    (
        "trunc-normal_20_s8",
        ["--method", "trunc-normal", "--shape", "4,5", "--seed", "8", "--lo", "-0.5", "--hi", "1.5"],
    ),
    ("sparse_6x4_s2", ["--method", "sparse", "--shape", "6,4", "--sparsity", "0.5", "--seed", "2"]),
    ("zer-o_8x3", ["--method", "zer-o", "--shape", "8,3"]),
]


def main() -> None:
    exe = sys.argv[1] if len(sys.argv) > 1 else str(HERE.parents[1] / "target" / "release" / "orthoformer")
    arrays = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, args in CASES:
            out = os.path.join(tmp, key + ".npy")
            subprocess.run([exe, "init", *args, "--out", out], check=True, capture_output=True)
            arrays[key] = np.load(out)
    np.savez(HERE / "fixtures" / "init_cli.npz", **arrays)
    print(f"wrote {len(arrays)} arrays")


if __name__ == "__main__":
    main()
