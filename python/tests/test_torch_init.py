"""``orthoformer.torch.init``: in-place fills of PyTorch tensors with the library's values
(the same bits as ``orthoformer.init``), ``torch.nn.init``'s fan rules and laws, and errors as
exceptions."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch

import orthoformer.init as oi
import orthoformer.torch.init as ti


def test_orthogonal_fills_in_place_with_the_generator_bits() -> None:
    w = torch.empty(48, 16)
    out = ti.orthogonal_(w, method="householder", seed=4, gain=2.0)
    assert out is w
    want = oi.orthogonal(48, 16, method="householder", seed=4, gain=2.0)
    assert np.array_equal(w.numpy(), want)
    assert torch.allclose(w.T @ w, 4.0 * torch.eye(16), atol=1e-5)


def test_orthogonal_flattens_trailing_dims_and_handles_wide() -> None:
    conv = ti.orthogonal_(torch.empty(8, 2, 3, 3), seed=1)
    flat = conv.reshape(8, -1)
    assert torch.allclose(flat @ flat.T, torch.eye(8), atol=1e-5)
    wide = ti.orthogonal_(torch.empty(3, 10, dtype=torch.float64), method="cayley", seed=2)
    assert torch.allclose(wide @ wide.T, torch.eye(3, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize(
    "fill,np_call",
    [
        (
            lambda t: ti.uniform_(t, -1.0, 3.0, seed=5),
            lambda s: oi.uniform(s, -1.0, 3.0, seed=5, dtype=np.float64),
        ),
        (
            lambda t: ti.normal_(t, 2.0, 0.5, seed=5),
            lambda s: oi.normal(s, 2.0, 0.5, seed=5, dtype=np.float64),
        ),
        (
            lambda t: ti.trunc_normal_(t, 0.0, 1.0, -1.0, 1.0, seed=5),
            lambda s: oi.trunc_normal(s, 0.0, 1.0, -1.0, 1.0, seed=5, dtype=np.float64),
        ),
        (
            lambda t: ti.xavier_uniform_(t, gain=1.5, seed=5),
            lambda s: oi.xavier_uniform(s, 1.5, seed=5, dtype=np.float64),
        ),
        (lambda t: ti.xavier_normal_(t, seed=5), lambda s: oi.xavier_normal(s, seed=5, dtype=np.float64)),
        (
            lambda t: ti.kaiming_uniform_(t, a=0.1, mode="fan_out", seed=5),
            lambda s: oi.kaiming_uniform(s, 0.1, "fan_out", seed=5, dtype=np.float64),
        ),
        (
            lambda t: ti.kaiming_normal_(t, nonlinearity="relu", seed=5),
            lambda s: oi.kaiming_normal(s, nonlinearity="relu", seed=5, dtype=np.float64),
        ),
        (lambda t: ti.sparse_(t, 0.25, seed=5), lambda s: oi.sparse(s, 0.25, seed=5, dtype=np.float64)),
        (lambda t: ti.constant_(t, 0.3), lambda s: oi.constant(s, 0.3, dtype=np.float64)),
        (lambda t: ti.ones_(t), lambda s: oi.ones(s, dtype=np.float64)),
        (lambda t: ti.zeros_(t), lambda s: oi.zeros(s, dtype=np.float64)),
        (lambda t: ti.eye_(t), lambda s: oi.eye(s, dtype=np.float64)),
        (lambda t: ti.zero_init_(t), lambda s: oi.zero_init(s, dtype=np.float64)),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_fills_equal_the_numpy_values_rounded_once(fill, np_call, dtype) -> None:
    t = torch.empty(12, 8, dtype=dtype)
    fill(t)
    want = torch.from_numpy(np_call((12, 8))).to(dtype)
    assert torch.equal(t, want)


def test_fills_a_non_contiguous_view_in_place() -> None:
    base = torch.zeros(8, 6)
    view = base.T  # (6, 8), non-contiguous
    ti.normal_(view, seed=1)
    assert torch.equal(base.T, torch.from_numpy(oi.normal((6, 8), seed=1)))


def test_laws_follow_torch_nn_init_fan_rules() -> None:
    w = ti.kaiming_normal_(torch.empty(512, 64, 3, 3), mode="fan_out", nonlinearity="relu", seed=0)
    fan_out = 512 * 9
    assert float(w.std()) == pytest.approx((2 / fan_out) ** 0.5, rel=0.01)
    x = ti.xavier_uniform_(torch.empty(300, 200), seed=0)
    a = (6 / 500) ** 0.5
    assert float(x.abs().max()) <= a and float(x.std()) == pytest.approx(a / 3**0.5, rel=0.02)
    assert ti.calculate_gain("relu") == torch.nn.init.calculate_gain("relu")
    assert ti.calculate_gain("leaky_relu", 0.3) == pytest.approx(
        torch.nn.init.calculate_gain("leaky_relu", 0.3)
    )


def test_dirac_is_torch_nn_init_dirac() -> None:
    ours = ti.dirac_(torch.empty(6, 3, 3, 3), groups=2)
    theirs = torch.nn.init.dirac_(torch.empty(6, 3, 3, 3), groups=2)
    assert torch.equal(ours, theirs)
    assert torch.equal(ti.eye_(torch.empty(3, 5)), torch.nn.init.eye_(torch.empty(3, 5)))


def test_zero_element_tensors_warn_and_stay() -> None:
    with pytest.warns(UserWarning, match="zero-element"):
        t = ti.kaiming_uniform_(torch.empty(0, 3), seed=1)
    assert t.shape == (0, 3)


def test_mimetic_fills_four_linear_weights() -> None:
    ws = [torch.empty(16, 16) for _ in range(4)]
    ti.mimetic_(*ws, heads=2, seed=3)
    m = oi.mimetic(16, 2, seed=3, dtype=np.float64)
    assert torch.allclose(ws[0], torch.from_numpy(m["wq"].T).float())
    with pytest.raises(ValueError, match="four 16 x 16"):
        ti.mimetic_(ws[0], ws[1], ws[2], torch.empty(16, 8), heads=2)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: ti.xavier_normal_(torch.empty(5)), "at least 2 dimensions"),
        (lambda: ti.kaiming_uniform_(torch.empty(3, 3), nonlinearity="gelu"), "unknown nonlinearity"),
        (lambda: ti.orthogonal_(torch.empty(4)), "at least 2 dimensions"),
        (lambda: ti.orthogonal_(torch.empty(4, 4), method="gram-schmidt"), "unknown orthogonal method"),
        (lambda: ti.sparse_(torch.empty(3, 3, 3), 0.1), "exactly 2"),
        (lambda: ti.dirac_(torch.empty(3, 3)), "3, 4 or 5"),
        (lambda: ti.uniform_(torch.empty(2), 2.0, 1.0), "bounds"),
    ],
)
def test_bad_inputs_raise_value_errors(call, message) -> None:
    with pytest.raises(ValueError) as e:
        call()
    assert message in str(e.value)


def test_non_tensors_are_type_errors() -> None:
    with pytest.raises(TypeError):
        ti.normal_(np.zeros(3))  # type: ignore[arg-type]


# -- torch.nn.init's contract: signature, generator, per-call draws ---------------------------

SEEDLESS = [
    lambda t, g=None: ti.uniform_(t, -1.0, 1.0, g),
    lambda t, g=None: ti.normal_(t, 0.0, 1.0, g),
    lambda t, g=None: ti.trunc_normal_(t, 0.0, 1.0, -2.0, 2.0, g),
    lambda t, g=None: ti.xavier_uniform_(t, 1.0, g),
    lambda t, g=None: ti.xavier_normal_(t, 1.0, g),
    lambda t, g=None: ti.kaiming_uniform_(t, 0.0, "fan_in", "leaky_relu", g),
    lambda t, g=None: ti.kaiming_normal_(t, 0.0, "fan_in", "leaky_relu", g),
    lambda t, g=None: ti.orthogonal_(t, 1.0, g),
    lambda t, g=None: ti.sparse_(t, 0.25, 0.01, g),
]


@pytest.mark.parametrize("fill", SEEDLESS)
def test_seedless_calls_differ_and_replay_under_manual_seed_and_generators(fill) -> None:
    torch.manual_seed(0)
    a, b = fill(torch.empty(8, 6)), fill(torch.empty(8, 6))
    assert not torch.equal(a, b)  # a loop over layers gives each its own values
    torch.manual_seed(0)
    assert torch.equal(fill(torch.empty(8, 6)), a) and torch.equal(fill(torch.empty(8, 6)), b)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(fill(torch.empty(8, 6), g1), fill(torch.empty(8, 6), g2))


def test_seed_keyword_gives_the_library_bits_and_ignores_the_generator() -> None:
    torch.manual_seed(0)
    a = ti.orthogonal_(torch.empty(6, 4), seed=3)
    torch.manual_seed(1)
    assert torch.equal(a, ti.orthogonal_(torch.empty(6, 4), seed=3))
    assert np.array_equal(a.numpy(), oi.orthogonal(6, 4, seed=3))


def test_positional_arguments_are_torch_s() -> None:
    w = ti.orthogonal_(torch.empty(5, 5), 2.0)  # gain, positionally
    assert torch.allclose(w @ w.T, 4.0 * torch.eye(5), atol=1e-5)
    n = ti.normal_(torch.empty(4000), 3.0, 0.5)
    assert float(n.mean()) == pytest.approx(3.0, abs=0.05) and float(n.std()) == pytest.approx(0.5, rel=0.05)
    for name in (
        "uniform_",
        "normal_",
        "trunc_normal_",
        "xavier_uniform_",
        "xavier_normal_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "orthogonal_",
        "sparse_",
    ):
        ours = list(inspect.signature(getattr(ti, name)).parameters)
        theirs = list(inspect.signature(getattr(torch.nn.init, name)).parameters)
        assert ours[: len(theirs)] == theirs, name


def ks_pvalue(samples: np.ndarray, cdf) -> float:
    """Two-sided one-sample Kolmogorov-Smirnov p-value (asymptotic Kolmogorov law)."""
    x = np.sort(samples)
    n = len(x)
    f = cdf(x)
    d = max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    return float(
        min(1.0, max(0.0, 2 * sum((-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))))
    )


def test_seedless_orthogonal_has_the_haar_law() -> None:
    # A 3 x 3 Haar matrix's entries are uniform on [-1, 1] ((x + 1)/2 ~ Beta(1, 1)), and the
    # determinant's sign is ±1 with equal odds.
    torch.manual_seed(0)
    mats = [ti.orthogonal_(torch.empty(3, 3, dtype=torch.float64)) for _ in range(1500)]
    for i, j in ((0, 0), (1, 2), (2, 1)):
        p = ks_pvalue(np.array([float(m[i, j]) for m in mats]), lambda x: (x + 1) / 2)
        assert p > 1e-3, f"entry ({i},{j}): KS p = {p}"
    pos = sum(float(torch.linalg.det(m)) > 0 for m in mats)
    assert abs(pos - 750) < 4 * math.sqrt(1500 * 0.25)
    # The check sees a wrong law: squared entries are not uniform.
    assert ks_pvalue(np.array([float(m[0, 0]) ** 2 * 2 - 1 for m in mats]), lambda x: (x + 1) / 2) < 1e-6


def test_seedless_normal_and_uniform_have_their_laws() -> None:
    torch.manual_seed(1)
    z = np.concatenate([ti.normal_(torch.empty(50), 0.0, 2.0).numpy() for _ in range(40)])
    assert (
        ks_pvalue(
            z.astype(np.float64), lambda x: 0.5 * (1 + np.vectorize(math.erf)(x / (2.0 * math.sqrt(2))))
        )
        > 1e-3
    )
    u = np.concatenate([ti.uniform_(torch.empty(50), -1.0, 3.0).numpy() for _ in range(40)])
    assert ks_pvalue(u.astype(np.float64), lambda x: (x + 1) / 4) > 1e-3
