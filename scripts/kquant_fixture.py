"""Writes tests/fixtures/gguf/kquants.gguf: random Q4_K, Q5_K, Q6_K, BF16, Q5_0 and Q5_1 tensors (two
rows of 512 weights each) and, beside each as `<name>.f32`, its dequantisation by the `gguf`
package (llama.cpp's Python reference), which tests/gguf_kquants.rs compares with the
crate's own dequantisation and kernels.

Run: /work/venv/bin/python scripts/kquant_fixture.py
"""

import pathlib

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/gguf/kquants.gguf"
ROWS, COLS = 2, 512


def random_blocks(ty: T, rng: np.random.Generator) -> np.ndarray:
    """Random super-blocks with finite, moderate f16 scales (the rest are any bytes)."""
    per, size = gguf.GGML_QUANT_SIZES[ty]
    n = ROWS * COLS // per
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    halves = {T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.Q5_0: [0], T.Q5_1: [0, 2]}[ty]
    for at in halves:
        scale = rng.uniform(-0.05, 0.05, size=n).astype(np.float16)
        raw[:, at : at + 2] = scale.view(np.uint8).reshape(n, 2)
    return raw.reshape(ROWS, COLS // per * size)


def main() -> None:
    rng = np.random.default_rng(2028)
    w = gguf.GGUFWriter(str(OUT), "llama")
    for ty in (T.Q4_K, T.Q5_K, T.Q6_K):
        raw = random_blocks(ty, rng)
        name = ty.name.lower()
        w.add_tensor(name, raw, raw_dtype=ty)
        w.add_tensor(name + ".f32", gguf.quants.dequantize(raw, ty).astype(np.float32))
    x = rng.normal(0, 3, size=(ROWS, COLS)).astype(np.float32)
    bf = gguf.quants.quantize(x, T.BF16)
    w.add_tensor("bf16", bf, raw_dtype=T.BF16)
    w.add_tensor("bf16.f32", gguf.quants.dequantize(bf, T.BF16).astype(np.float32))
    # The 5-bit block types (llama.cpp's K-quant files use them for rows that are not whole
    # super-blocks), drawn after the others so their bytes stay as they were.
    for ty in (T.Q5_0, T.Q5_1):
        raw = random_blocks(ty, rng)
        name = ty.name.lower()
        w.add_tensor(name, raw, raw_dtype=ty)
        w.add_tensor(name + ".f32", gguf.quants.dequantize(raw, ty).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
