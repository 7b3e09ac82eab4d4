"""Checks a GGUF written by `orthoformer quantize --out ... --method rtn --rotate none`
against gguf-py (the reference reader, PyPI `gguf`) and an independent numpy RTN: every
decoder matrix of the listed layers and the embedding, dequantised by gguf-py, must equal
exactly (as numbers) the source model's weights rounded to nearest on the block format's grid (the
grid as the format defines it: f16 scales, Q4_K's 6-bit sub-block scales and mins).

Run: /work/venv/bin/python scripts/check_quant_gguf.py SOURCE.gguf OUT.gguf [--layers 0,29]
"""

import argparse
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.quants import dequantize


def rnd(v):
    """Round half away from zero, as Rust's f64::round."""
    return np.where(v >= 0, np.floor(v + 0.5), -np.floor(-v + 0.5))


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def codes(x, m, d, zero, qmax):
    """Nearest code: round((x - m)/d) + zero, clamped; a zero step gives the zero code."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = rnd((x.astype(np.float64) - m.astype(np.float64)) / d.astype(np.float64)) + zero
    q = np.where(d == 0, zero, q)
    return np.clip(q, 0, qmax)


def rtn(w, ty):
    """Grid values of `w` (rows x cols, f32) rounded to nearest on `ty`'s blocks."""
    if ty == T.Q4_K:
        s = w.reshape(-1, 8, 32)
        lo = np.minimum(s.min(axis=2), np.float32(0))
        hi = np.maximum(lo, s.max(axis=2))
        scale = ((hi - lo) / np.float32(15)).astype(np.float32)
        mn = -lo
        d = f16(scale.max(axis=1) / np.float32(63))[:, None]
        dmin = f16(mn.max(axis=1) / np.float32(63))[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            ls = np.where(d > 0, np.clip(rnd(scale / d), 0, 63), 0).astype(np.float32)
            lm = np.where(dmin > 0, np.clip(rnd(mn / dmin), 0, 63), 0).astype(np.float32)
        dl = (d * ls).astype(np.float32)[:, :, None]
        m = (-(dmin * lm)).astype(np.float32)[:, :, None]
        q = codes(s, m, dl, 0, 15).astype(np.float32)
        return (q * dl + m).astype(np.float32).reshape(w.shape)
    b = w.reshape(-1, 32)
    if ty == T.Q8_0:
        d = f16(np.abs(b).max(axis=1) / np.float32(127))[:, None]
        m, zero, qmax = np.zeros_like(d), 127, 254
    elif ty == T.Q4_0:
        ext = b[np.arange(len(b)), np.abs(b).argmax(axis=1)]
        d = f16(ext / np.float32(-8))[:, None]
        m, zero, qmax = np.zeros_like(d), 8, 15
    elif ty == T.Q4_1:
        lo, hi = b.min(axis=1), b.max(axis=1)
        d = f16((hi - lo) / np.float32(15))[:, None]
        m, zero, qmax = f16(lo)[:, None], 0, 15
    else:
        raise SystemExit(f"error: tensor type {ty.name} is not one this check knows")
    q = codes(b, m, d, zero, qmax)
    return ((q - zero).astype(np.float32) * d + m).astype(np.float32).reshape(w.shape)


def tensors(path):
    r = GGUFReader(path)
    return {t.name: t for t in r.tensors}


def as_f32(t):
    shape = [int(x) for x in reversed(t.shape)]
    return dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--layers", default="0")
    a = ap.parse_args()
    src, out = tensors(a.source), tensors(a.out)
    names = ["token_embd.weight"]
    for layer in a.layers.split(","):
        names += [f"blk.{layer}.{n}.weight" for n in
                  ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]]
    bad = 0
    for n in names:
        t = out[n]
        got = as_f32(t)
        want = rtn(as_f32(src[n]), t.tensor_type)
        # Equal as numbers: Q4_0's zero code with a negative scale decodes to -0.0.
        same = np.array_equal(got, want)
        diff = float(np.max(np.abs(got - want)))
        print(f"{n:28s} {t.tensor_type.name:5s} {got.shape} exact={same} max|diff|={diff:.3g}")
        bad += not same
    if bad:
        print(f"error: {bad} tensors differ from RTN on their grid", file=sys.stderr)
        sys.exit(1)
    print("ok: every checked tensor is exactly RTN on its GGUF grid, read by gguf-py")


if __name__ == "__main__":
    main()
