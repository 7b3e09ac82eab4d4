"""Writes tests/fixtures/scaling/power_law_fits.json: three synthetic data sets and their
least-squares fits of y = e + a*x^(-alpha) by scipy.optimize.curve_fit, the oracle for the
Rust fit in src/analysis/scaling/ (its tests_fixture.rs reads this file).

The fit is the same problem as the Rust one: unweighted least squares in y with bounds
0 <= e <= min(y), a >= 0, alpha >= 0 (method "trf", tolerances at 1e-15), started from
several points, keeping the lowest residual. The data sets:
  noisy_law    e=2, a=60, alpha=0.3 at 5 sizes x 3 seeds, noise sd 0.01
  e_near_zero  e=0.02, a=5, alpha=0.15 over FLOPs 1e12..1e16, noise sd 0.001
  tiny_spread  e=3, a=0.05, alpha=0.5: the losses span 5e-4, noise sd 1e-5

Needs numpy and scipy (pip install scipy).
Usage: python3 scripts/scaling_fit_fixture.py
"""
import json
import os

import numpy as np
import scipy
from scipy.optimize import curve_fit

OUT = "tests/fixtures/scaling/power_law_fits.json"
CASES = [
    # name, (e, a, alpha), sizes, noise sd
    ("noisy_law", (2.0, 60.0, 0.3), np.geomspace(1e6, 2.2e7, 5), 0.01),
    ("e_near_zero", (0.02, 5.0, 0.15), np.geomspace(1e12, 1e16, 5), 0.001),
    ("tiny_spread", (3.0, 0.05, 0.5), np.geomspace(1e4, 1e6, 5), 1e-5),
]
SEEDS = [0, 1, 2]


def law(x, e, a, alpha):
    return e + a * x ** (-alpha)


def fit(x, y):
    """The lowest-residual bounded fit over a few starts."""
    best = None
    lo, hi = [0.0, 0.0, 0.0], [y.min(), np.inf, np.inf]
    for frac in (0.0, 0.5, 0.9, 0.99):
        e0 = frac * y.min()
        slope, icpt = np.polyfit(np.log(x), np.log(y - e0), 1)
        p0 = [e0, np.exp(icpt), max(-slope, 1e-3)]
        try:
            p, _ = curve_fit(law, x, y, p0=p0, bounds=(lo, hi), method="trf",
                             x_scale="jac", ftol=1e-15, xtol=1e-15, gtol=1e-15,
                             max_nfev=100000)
        except RuntimeError:
            continue
        rss = float(np.sum((y - law(x, *p)) ** 2))
        if best is None or rss < best[1]:
            best = (p, rss)
    return best


def main():
    rng = np.random.default_rng(47)
    cases = []
    for name, truth, sizes, sd in CASES:
        obs = [(float(x), float(law(x, *truth) + sd * rng.standard_normal()), s)
               for s in SEEDS for x in sizes]
        x = np.array([o[0] for o in obs])
        y = np.array([o[1] for o in obs])
        (e, a, alpha), rss = fit(x, y)
        cases.append({
            "name": name,
            "truth": dict(zip(("e", "a", "alpha"), truth)),
            "observations": [{"x": ox, "y": oy, "seed": s} for ox, oy, s in obs],
            "fit": {"e": float(e), "a": float(a), "alpha": float(alpha), "rss": rss},
        })
        print(f"{name}: e={e:.9g} a={a:.9g} alpha={alpha:.9g} rss={rss:.6g}")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    doc = {"script": "scripts/scaling_fit_fixture.py", "numpy": np.__version__,
           "scipy": scipy.__version__, "cases": cases}
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, OUT)  # atomic: a reader never sees half a fixture
    print("wrote", OUT, "with scipy", scipy.__version__)


if __name__ == "__main__":
    main()
