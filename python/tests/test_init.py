"""``orthoformer.init`` against the command line (bit for bit), against pinned CLI output
(``fixtures/init_cli.npz``, written by ``make_init_fixture.py``), and by the properties and
errors the library promises."""

from __future__ import annotations

import numpy as np
import pytest

import orthoformer.init as oi
from make_init_fixture import CASES

FIXTURE = np.load(__file__.rsplit("/", 1)[0] + "/fixtures/init_cli.npz")


def _from_cli_args(args: list[str]) -> np.ndarray:
    """The package call equivalent to ``orthoformer init ARGS``."""
    a = dict(zip(args[::2], args[1::2]))
    method = a.pop("--method")
    seed = int(a.pop("--seed", "0"))
    dtype = np.float64 if a.pop("--dtype", "f32") == "f64" else np.float32
    if "--shape" in a:
        shape = [int(x) for x in a.pop("--shape").split(",")]
    else:
        shape = [int(a.pop("--rows")), int(a.pop("--cols"))]
    params = {k[2:]: float(v) for k, v in a.items()}
    return oi.generate(method, shape, seed=seed, dtype=dtype, **params)


@pytest.mark.parametrize("key,args", CASES)
def test_matches_pinned_cli_output(key: str, args: list[str]) -> None:
    want = FIXTURE[key]
    got = _from_cli_args(args)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), key


@pytest.mark.parametrize("method", oi.ORTHO_METHODS)
@pytest.mark.parametrize("rows,cols,seed,gain", [(768, 64, 0, 1.0), (5, 11, 3, 0.5), (17, 17, 42, 2.0)])
def test_orthogonal_is_the_cli_bit_for_bit(cli, tmp_path, method, rows, cols, seed, gain) -> None:
    out = tmp_path / "x.npy"
    cli(
        "init",
        "--method",
        method,
        "--rows",
        rows,
        "--cols",
        cols,
        "--seed",
        seed,
        "--gain",
        gain,
        "--out",
        out,
    )
    want = np.load(out)
    got = oi.orthogonal(rows, cols, method=method, seed=seed, gain=gain)
    assert got.dtype == np.float32 and got.shape == (rows, cols)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(
    "method,shape,extra",
    [
        ("uniform", "3,4", ["--lo", "-1", "--hi", "2"]),
        ("normal", "5,2", ["--mean", "1", "--std", "3"]),
        ("xavier-normal", "8,6", ["--gain", "2"]),
        ("kaiming-normal", "6,3,2,2", ["--mode", "fan_out", "--nonlinearity", "relu"]),
        ("orthogonal", "6,2,2", ["--gain", "0.5"]),
        ("dirac", "4,2,3,3", ["--groups", "2"]),
        ("eye", "3,5", []),
    ],
)
def test_torch_parity_methods_are_the_cli_bit_for_bit(cli, tmp_path, method, shape, extra) -> None:
    out = tmp_path / "x.npy"
    cli("init", "--method", method, "--shape", shape, "--seed", 11, *extra, "--dtype", "f64", "--out", out)
    want = np.load(out)
    params = {}
    for k, v in zip(extra[::2], extra[1::2]):
        key = k[2:]
        params[key] = v if key in ("mode", "nonlinearity") else (int(v) if key == "groups" else float(v))
    got = oi.generate(method, [int(d) for d in shape.split(",")], seed=11, dtype=np.float64, **params)
    assert np.array_equal(got, want)


def test_orthogonality_gain_and_orientation() -> None:
    tall = oi.orthogonal(64, 16, "householder", seed=1, gain=3.0, dtype=np.float64)
    assert np.allclose(tall.T @ tall, 9.0 * np.eye(16), atol=1e-12)
    wide = oi.orthogonal(4, 10, "svd", seed=1, dtype=np.float64)
    assert np.allclose(wide @ wide.T, np.eye(4), atol=1e-12)
    assert oi.ortho_error(tall, gain=3.0) < 1e-12
    assert 1e-8 < oi.ortho_error(oi.orthogonal(64, 16, seed=1)) < 1e-5  # f32 rounding


def test_same_seed_same_bits_other_seed_other_values() -> None:
    a, b, c = oi.normal((50,), seed=3), oi.normal((50,), seed=3), oi.normal((50,), seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_fans_gain_and_kaiming_bounds() -> None:
    assert oi.fans((16, 8, 3, 3)) == (72, 144)
    assert oi.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert oi.calculate_gain("leaky_relu", 0.2) == pytest.approx((2 / 1.04) ** 0.5)
    w = oi.kaiming_uniform((256, 128), seed=0, dtype=np.float64)
    bound = np.sqrt(3) * np.sqrt(2) / np.sqrt(128)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert np.std(w) == pytest.approx(np.sqrt(2 / 128), rel=0.02)


def test_sparse_zeros_per_column_and_trunc_normal_bounds() -> None:
    s = oi.sparse((10, 7), sparsity=0.3, seed=1)
    assert all((s[:, j] == 0).sum() == 3 for j in range(7))
    t = oi.trunc_normal((4000,), mean=0.5, std=1.0, lo=0.0, hi=1.0, seed=2)
    assert t.min() >= 0.0 and t.max() <= 1.0


def test_mimetic_products_approximate_their_targets() -> None:
    m = oi.mimetic(32, 4, seed=0)
    assert m["wq"].shape == (32, 32) and m["vo_rel_error"] < 1e-10
    assert 0 < m["qk_rel_error"] < 1.0


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: oi.xavier_uniform((5,)), "at least 2 dimensions"),
        (lambda: oi.kaiming_normal((4, 4), nonlinearity="swish"), "unknown nonlinearity"),
        (lambda: oi.kaiming_normal((4, 4), mode="fan_avg"), "unknown mode"),
        (lambda: oi.sparse((4, 4), sparsity=1.5), "outside [0, 1]"),
        (lambda: oi.orthogonal(4, 4, gain=-1.0), "not a finite non-negative"),
        (lambda: oi.orthogonal(0, 4), "zero dimension"),
        (lambda: oi.generate("qr3", (2, 2)), "unknown method"),
        (lambda: oi.generate("normal", (2, 2), sdt=1.0), "unknown initialiser parameter"),
        (lambda: oi.dirac((4, 2, 3), groups=3), "divide"),
        (lambda: oi.eye((2, 2, 2)), "exactly 2"),
        (lambda: oi.constant((2,), float("nan")), "not a finite number"),
        (lambda: oi.ortho_error(np.ones(3)), "2-D"),
    ],
)
def test_bad_arguments_are_value_errors(call, message) -> None:
    with pytest.raises(ValueError, match=None) as e:
        call()
    assert message in str(e.value)


def test_absurd_sizes_are_refused_not_crashed() -> None:
    with pytest.raises((ValueError, MemoryError)):
        oi.normal((2**40, 2**40))
    with pytest.raises((ValueError, MemoryError)):
        oi.uniform((2**31, 2**31, 8))
