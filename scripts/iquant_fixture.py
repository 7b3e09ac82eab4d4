"""Writes tests/fixtures/gguf/iquants.gguf: random IQ4_NL and IQ4_XS tensors (two rows of 512
weights each) and, beside each as `<name>.f32`, its dequantisation by the `gguf` package
(llama.cpp's Python reference), which tests/integration/gguf_iquants.rs compares with the
crate's own dequantisation and kernels.

Any bytes are a valid block once its f16 scale `d` (the first two bytes of a block, in both
types) is finite; the scales here are moderate, and the first blocks of each tensor have
`d = +0` and `d = -0` so the signs of zero products are checked too.

Run: python3 -m venv /work/venv-iq4 && /work/venv-iq4/bin/pip install gguf numpy
     /work/venv-iq4/bin/python scripts/iquant_fixture.py
"""

import pathlib

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/gguf/iquants.gguf"
ROWS, COLS = 2, 512
# Largest |d|: IQ4_NL weights reach 127·|d|, IQ4_XS ones 32·127·|d|.
SCALE = {T.IQ4_NL: 0.05, T.IQ4_XS: 0.005}


def random_blocks(ty: T, rng: np.random.Generator) -> np.ndarray:
    """Random blocks of `ty` with finite, moderate f16 scales (the rest are any bytes)."""
    per, size = gguf.GGML_QUANT_SIZES[ty]
    n = ROWS * COLS // per
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    d = rng.uniform(-SCALE[ty], SCALE[ty], size=n).astype(np.float16)
    d[0], d[1] = np.float16(0.0), np.float16(-0.0)
    raw[:, 0:2] = d.view(np.uint8).reshape(n, 2)
    return raw.reshape(ROWS, COLS // per * size)


def main() -> None:
    rng = np.random.default_rng(2029)
    w = gguf.GGUFWriter(str(OUT), "llama")
    for ty in (T.IQ4_NL, T.IQ4_XS):
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
