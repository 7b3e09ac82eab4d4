"""Independent numpy reference of GPTQ for tests/quant_gptq.rs: writes a 64x128 layer, its
calibration Hessian and the codes, grid values and loss GPTQ gives for four settings into
tests/fixtures/quant/ (.npy). Float64 throughout, column by column (no lazy batching), so the
Rust implementation must agree code for code.

Run: /work/venv/bin/python scripts/gptq_reference.py
"""

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "quant"
ROWS, COLS, SAMPLES = 64, 128, 512
# (name, bits, group (0: per row), symmetric, act_order)
SETTINGS = [
    ("sym4_row_act", 4, 0, True, True),
    ("asym4_g32", 4, 32, False, False),
    ("sym8_g32_act", 8, 32, True, True),
    ("asym3_row", 3, 0, False, False),
]
DAMP = 0.01


def rnd(v):
    """Round half away from zero (Rust's f64::round)."""
    return np.where(v >= 0, np.floor(v + 0.5), -np.floor(-v + 0.5))


def grid(w32, bits, symmetric):
    """(d, m, zero, qmax) of one span, f32 arithmetic as the Rust grid."""
    w32 = w32.astype(np.float32)
    if symmetric:
        q = 2 ** (bits - 1) - 1
        amax = np.float32(np.max(np.abs(w32), initial=np.float32(0)))
        return np.float32(amax / np.float32(q)), np.float32(0), q, 2 * q
    q = 2**bits - 1
    lo = np.float32(min(np.float32(0), np.min(w32)))
    hi = np.float32(max(np.float32(0), np.max(w32)))
    d = np.float32((hi - lo) / np.float32(q))
    zero = int(rnd(np.float64(np.float32(-lo / d)))) if d > 0 else 0
    return d, np.float32(0), zero, q


def code(x, g):
    d, m, zero, qmax = g
    if d == 0:
        return min(max(zero, 0), qmax)
    q = rnd((x - np.float64(m)) / np.float64(d)) + zero
    return int(min(max(q, 0), qmax))


def value(q, g):
    d, m, zero, _ = g
    return np.float32(np.float32(q - zero) * d + m)


def gptq(w, h, bits, group, symmetric, act_order):
    n = w.shape[1]
    span = n if group == 0 else group
    dead = np.diag(h) == 0
    diag = np.where(dead, 1.0, np.diag(h))
    perm = np.argsort(-diag, kind="stable") if act_order else np.arange(n)
    hp = h.copy()
    hp[np.diag_indices(n)] = diag
    hp = hp[np.ix_(perm, perm)]
    hp[np.diag_indices(n)] += DAMP * diag.mean()
    linv = np.linalg.inv(np.linalg.cholesky(hp))
    u = np.linalg.cholesky(linv.T @ linv).T
    codes = np.zeros(w.shape, dtype=np.uint8)
    values = np.zeros(w.shape, dtype=np.float32)
    loss = 0.0
    w0 = np.where(dead[None, :], 0.0, w.astype(np.float64))
    for r in range(w.shape[0]):
        row = w0[r, perm].copy()
        grids = {}
        if act_order:
            for s in range(n // span):
                grids[s] = grid(w0[r, s * span:(s + 1) * span], bits, symmetric)
        for i in range(n):
            c = perm[i]
            s, j = divmod(c, span)
            if s not in grids:
                grids[s] = grid(row[i:i + span], bits, symmetric)
            g = grids[s]
            q = code(row[i], g)
            v = value(q, g)
            codes[r, c], values[r, c] = q, v
            e = row[i] - np.float64(v)
            d = u[i, i]
            loss += e * e / (2 * d * d)
            row[i + 1:] -= (e / d) * u[i, i + 1:]
    return codes, values, loss


def main():
    rng = np.random.default_rng(28)
    # Inputs with a few outlier channels and one dead input, as real activations have.
    x = rng.standard_normal((SAMPLES, COLS)).astype(np.float32)
    x[:, [3, 77]] *= 12.0
    x[:, 40] = 0.0
    w = (rng.standard_normal((ROWS, COLS)) * 0.05).astype(np.float32)
    xf = x.astype(np.float64)
    h = 2.0 * xf.T @ xf / SAMPLES
    OUT.mkdir(parents=True, exist_ok=True)
    np.save(OUT / "gptq_w.npy", w)
    np.save(OUT / "gptq_h.npy", h)
    for name, bits, group, sym, act in SETTINGS:
        codes, values, loss = gptq(w, h, bits, group, sym, act)
        np.save(OUT / f"gptq_{name}_codes.npy", codes)
        np.save(OUT / f"gptq_{name}_values.npy", values)
        np.save(OUT / f"gptq_{name}_loss.npy", np.array([loss]))
        err = np.einsum("ri,ij,rj->", w - values, h, w - values)
        print(f"{name}: loss {loss:.6f}, output error {err:.6f}")


if __name__ == "__main__":
    main()
