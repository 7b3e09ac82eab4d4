"""Writes tests/fixtures/init/*.safetensors: PyTorch's results for the deterministic inits and
fan computations, which tests/integration/init_toolkit.rs compares with Orthoformer's.

- deterministic.safetensors: eye_RxC, dirac_SHAPE_gG, constant_SHAPE, zero_PxQ (ZerO per the
  paper's Algorithm 1 written with torch and scipy.linalg.hadamard), all float64.
- fans.safetensors: fans_SHAPE = [fan_in, fan_out] (int64) from torch's
  _calculate_fan_in_and_fan_out, and gains = calculate_gain for a fixed list (float64).
Run: python3 scripts/torch_init_fixtures.py
"""
import math
import os

import scipy.linalg
import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "init")


def key(shape):
    return "x".join(str(s) for s in shape)


def zero_init(p, q):
    # ZerO, Algorithm 1 of Zhao et al. 2021.
    if p == q:
        return torch.eye(p, dtype=torch.float64)
    if p < q:
        return torch.eye(p, q, dtype=torch.float64)
    m = math.ceil(math.log2(p))
    c = 2 ** (-(m - 1) / 2)
    h = torch.tensor(scipy.linalg.hadamard(2 ** m), dtype=torch.float64)
    return c * h[:p, :q]


def main():
    os.makedirs(OUT, exist_ok=True)
    det = {}
    for r, c in [(1, 1), (3, 3), (3, 5), (6, 2)]:
        t = torch.empty(r, c, dtype=torch.float64)
        det[f"eye_{r}x{c}"] = torch.nn.init.eye_(t)
    for shape, g in [((4, 2, 3), 1), ((6, 3, 3, 3), 2), ((4, 4, 2, 3, 3), 4), ((2, 5, 4, 4), 1), ((6, 2, 5), 3)]:
        t = torch.empty(*shape, dtype=torch.float64)
        det[f"dirac_{key(shape)}_g{g}"] = torch.nn.init.dirac_(t, groups=g)
    for shape, v in [((2, 3), 0.25), ((4, 1, 2), -3.0)]:
        det[f"constant_{key(shape)}"] = torch.nn.init.constant_(torch.empty(*shape, dtype=torch.float64), v)
    for p, q in [(4, 4), (3, 7), (8, 3), (5, 2), (13, 6), (64, 64)]:
        det[f"zero_{p}x{q}"] = zero_init(p, q).contiguous()
    save_file(det, os.path.join(OUT, "deterministic.safetensors"))

    fans = {}
    for shape in [(3, 5), (64, 32, 3), (16, 8, 3, 3), (8, 4, 2, 3, 5), (1, 1)]:
        fi, fo = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
        fans[f"fans_{key(shape)}"] = torch.tensor([fi, fo], dtype=torch.int64)
    cases = [("linear", None), ("conv1d", None), ("conv2d", None), ("conv3d", None),
             ("conv_transpose1d", None), ("conv_transpose2d", None), ("conv_transpose3d", None),
             ("sigmoid", None), ("tanh", None), ("relu", None), ("leaky_relu", None),
             ("leaky_relu", 10), ("leaky_relu", 0.2), ("selu", None)]
    fans["gains"] = torch.tensor([torch.nn.init.calculate_gain(n, p) for n, p in cases], dtype=torch.float64)
    save_file(fans, os.path.join(OUT, "fans.safetensors"))


if __name__ == "__main__":
    main()
