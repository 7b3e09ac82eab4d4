//! The least-squares fit of `y = e + a·x^(−α)` (see the module doc for the law and why the fit
//! is unweighted).
//!
//! Method, in three steps:
//!
//! 1. **Normalise x.** With `u = ln(x / x̄)`, `x̄` the geometric mean of the `x`, the law is
//!    `y = e + b·exp(−α·u)` with `b = a·x̄^(−α)`. FLOPs run to 1e18, where `a` itself spans
//!    many decades; `b` is of the order of the losses, so the normal equations stay well scaled.
//! 2. **Profile over `e`.** For a fixed `e < min y`, `ln(y − e) = ln b − α·u` is a straight
//!    line, fitted by least squares. The `y`-space residual of that `(e, b, α)` is scanned over
//!    a grid of `e` in `[0, min y)` (even steps, plus steps that close in on `min y`
//!    geometrically, where the optimum sits when the losses flatten), and the best cell is
//!    refined by golden-section search.
//! 3. **Polish all three** by Levenberg-Marquardt (Marquardt's diagonal scaling) on the
//!    `y`-space residual, from the profile's best point, keeping `0 ≤ e ≤ min y` (a step that
//!    would cross a bound stops `e` there and solves for `b, α` alone), `b > 0` and `α > 0`.
//!    The profile's line fit is only a log-space start; this step makes the answer the
//!    `y`-space least-squares fit, which `scipy.optimize.curve_fit` matches
//!    (`scripts/scaling_fit_fixture.py`).

use super::solve::{line, solve};
use super::{Observation, PowerLaw, PowerLawFit, ScalingError};

/// Even steps of the profile grid over `e / min y`.
const EVEN_STEPS: usize = 32;
/// Geometric steps towards `min y`: `1 − 10^(−k/4)` for `k = 1..=40` (to `1 − 1e-10`).
const GEOMETRIC_STEPS: usize = 40;
/// Golden-section iterations in the best grid cell (each shrinks it by 0.618).
const GOLDEN_ITERS: usize = 80;
/// Levenberg-Marquardt iterations at most; exact data converges in a handful.
const LM_ITERS: usize = 500;

/// Fits `y = e + a·x^(−alpha)` to `obs` by least squares in `y` with `0 ≤ e ≤ min y`, `a > 0`,
/// `alpha > 0` (method in this file's doc).
///
/// Refuses (with [`ScalingError`] in the library's error): an `x` that is not finite and
/// positive, a `y` that is not finite, fewer than 3 distinct `x`, a smallest loss `≤ 0`, and
/// losses that do not fall with `x` (no law with `alpha > 0` fits).
pub fn fit(obs: &[Observation]) -> crate::Result<PowerLawFit> {
    Ok(fit_checked(obs)?)
}

/// [`fit`] with the subsystem's own error, for the bootstrap (which counts failed draws).
pub(super) fn fit_checked(obs: &[Observation]) -> Result<PowerLawFit, ScalingError> {
    validate(obs)?;
    let n = obs.len() as f64;
    let ln_x0 = obs.iter().map(|o| o.x.ln()).sum::<f64>() / n;
    let problem = Problem {
        u: obs.iter().map(|o| o.x.ln() - ln_x0).collect(),
        y: obs.iter().map(|o| o.y).collect(),
        min_y: obs.iter().map(|o| o.y).fold(f64::INFINITY, f64::min),
    };
    if problem.min_y <= 0.0 {
        return Err(ScalingError::LossNotPositive { min: problem.min_y });
    }
    let start = problem.profile_minimum().ok_or(ScalingError::NoFall)?;
    let [e, b, alpha] = problem.polish(start);
    // Back to raw x: a = b·x̄^alpha, in logs so that only a truly unrepresentable `a` fails.
    let a = (b.ln() + alpha * ln_x0).exp();
    if !(a.is_finite() && a > 0.0) {
        return Err(ScalingError::NotFinite { alpha });
    }
    let law = PowerLaw { e, a, alpha };
    let rss = obs.iter().map(|o| (o.y - law.at(o.x)).powi(2)).sum();
    Ok(PowerLawFit {
        law,
        rss,
        points: obs.len(),
    })
}

/// Checks every point and that at least 3 distinct `x` are present.
pub(super) fn validate(obs: &[Observation]) -> Result<(), ScalingError> {
    for (index, o) in obs.iter().enumerate() {
        if !(o.x.is_finite() && o.x > 0.0 && o.y.is_finite()) {
            return Err(ScalingError::BadObservation {
                index,
                x: o.x,
                y: o.y,
            });
        }
    }
    let distinct = distinct_x(obs).len();
    if distinct < 3 {
        return Err(ScalingError::TooFewSizes { distinct });
    }
    Ok(())
}

/// The distinct `x` of `obs`, increasing (equal means bit-equal: sizes and FLOPs are counts).
pub(super) fn distinct_x(obs: &[Observation]) -> Vec<f64> {
    let mut xs: Vec<f64> = obs.iter().map(|o| o.x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs
}

/// The normalised problem: `y ≈ e + b·exp(−α·u)`.
struct Problem {
    u: Vec<f64>,
    y: Vec<f64>,
    min_y: f64,
}

impl Problem {
    /// `Σ (y − e − b·exp(−α·u))²` at `θ = [e, b, α]`.
    fn rss(&self, [e, b, alpha]: [f64; 3]) -> f64 {
        let r = |(&u, &y): (&f64, &f64)| y - e - b * (-alpha * u).exp();
        self.u.iter().zip(&self.y).map(|p| r(p).powi(2)).sum()
    }

    /// The log-space line fit at a fixed `e < min y`, with its `y`-space residual; `None`
    /// when the line does not fall (`α ≤ 0`) or is not finite.
    fn at_e(&self, e: f64) -> Option<([f64; 3], f64)> {
        let z: Vec<f64> = self.y.iter().map(|y| (y - e).ln()).collect();
        let (c, slope) = line(&self.u, &z)?;
        let theta = [e, c.exp(), -slope];
        let cost = self.rss(theta);
        (theta[2] > 0.0 && theta[1] > 0.0 && theta[1].is_finite() && cost.is_finite())
            .then_some((theta, cost))
    }

    /// The best profile point: a grid over `e / min y`, then golden section in the best cell.
    fn profile_minimum(&self) -> Option<[f64; 3]> {
        let mut grid: Vec<f64> = (0..EVEN_STEPS)
            .map(|j| j as f64 / EVEN_STEPS as f64)
            .collect();
        grid.extend((1..=GEOMETRIC_STEPS).map(|k| 1.0 - 10f64.powf(-(k as f64) / 4.0)));
        grid.sort_by(f64::total_cmp);
        grid.dedup();
        let cost = |f: f64| self.at_e(f * self.min_y).map_or(f64::INFINITY, |(_, c)| c);
        let costs: Vec<f64> = grid.iter().map(|&f| cost(f)).collect();
        let best = (0..grid.len()).min_by(|&i, &j| costs[i].total_cmp(&costs[j]))?;
        if !costs[best].is_finite() {
            return None;
        }
        let (mut lo, mut hi) = (
            grid[best.saturating_sub(1)],
            grid[(best + 1).min(grid.len() - 1)],
        );
        // Golden section keeps two interior points; the cell's minimum is unimodal in practice,
        // and the grid point is kept if the search does worse.
        let g = (5f64.sqrt() - 1.0) / 2.0;
        let (mut p, mut q) = (hi - g * (hi - lo), lo + g * (hi - lo));
        let (mut cp, mut cq) = (cost(p), cost(q));
        for _ in 0..GOLDEN_ITERS {
            if cp <= cq {
                (hi, q, cq) = (q, p, cp);
                p = hi - g * (hi - lo);
                cp = cost(p);
            } else {
                (lo, p, cp) = (p, q, cq);
                q = lo + g * (hi - lo);
                cq = cost(q);
            }
        }
        let f = if cp.min(cq) < costs[best] {
            if cp <= cq { p } else { q }
        } else {
            grid[best]
        };
        self.at_e(f * self.min_y).map(|(theta, _)| theta)
    }

    /// Levenberg-Marquardt from `theta`, within `0 ≤ e ≤ min y`, `b > 0`, `α > 0`. Every
    /// accepted step lowers the residual, so the result is never worse than the start.
    fn polish(&self, mut theta: [f64; 3]) -> [f64; 3] {
        let mut cost = self.rss(theta);
        let mut lambda = 1e-3;
        for _ in 0..LM_ITERS {
            if cost == 0.0 {
                break;
            }
            let (jtj, jtr) = self.normal_equations(theta);
            let mut moved = None;
            while lambda < 1e20 {
                if let Some(step) = self.step(theta, &jtj, &jtr, lambda) {
                    let next = [theta[0] + step[0], theta[1] + step[1], theta[2] + step[2]];
                    let c = self.rss(next);
                    if next[1] > 0.0 && next[2] > 0.0 && c < cost {
                        moved = Some((next, c, step));
                        break;
                    }
                }
                lambda *= 4.0;
            }
            let Some((next, c, step)) = moved else { break };
            let tiny = (0..3).all(|k| step[k].abs() <= 1e-13 * (theta[k].abs() + 1e-13));
            let flat = cost - c <= 1e-15 * cost;
            theta = next;
            cost = c;
            lambda = (lambda / 3.0).max(1e-12);
            if tiny && flat {
                break;
            }
        }
        theta
    }

    /// `JᵀJ` and `Jᵀr` at `theta`, with `r = y − f` and `J = ∂f/∂(e, b, α)`.
    fn normal_equations(&self, [e, b, alpha]: [f64; 3]) -> ([[f64; 3]; 3], [f64; 3]) {
        let (mut jtj, mut jtr) = ([[0.0; 3]; 3], [0.0; 3]);
        for (&u, &y) in self.u.iter().zip(&self.y) {
            let p = (-alpha * u).exp();
            let r = y - e - b * p;
            let j = [1.0, p, -b * u * p];
            for ((row, g), jk) in jtj.iter_mut().zip(&mut jtr).zip(j) {
                *g += jk * r;
                for (cell, jl) in row.iter_mut().zip(j) {
                    *cell += jk * jl;
                }
            }
        }
        (jtj, jtr)
    }

    /// The damped Gauss-Newton step `(JᵀJ + λ·diag JᵀJ) δ = Jᵀr`; when it would take `e` out
    /// of `[0, min y]`, `e` stops at the bound and `(b, α)` solve the rest of the linearised
    /// problem with that `δe`.
    fn step(
        &self,
        theta: [f64; 3],
        jtj: &[[f64; 3]; 3],
        jtr: &[f64; 3],
        lambda: f64,
    ) -> Option<[f64; 3]> {
        let mut a = *jtj;
        for (k, row) in a.iter_mut().enumerate() {
            row[k] += lambda * jtj[k][k];
        }
        let full = solve(a, *jtr)?;
        let e_next = theta[0] + full[0];
        if (0.0..=self.min_y).contains(&e_next) {
            return Some(full);
        }
        let de = e_next.clamp(0.0, self.min_y) - theta[0];
        let rest = solve(
            [[a[1][1], a[1][2]], [a[2][1], a[2][2]]],
            [jtr[1] - a[1][0] * de, jtr[2] - a[2][0] * de],
        )?;
        Some([de, rest[0], rest[1]])
    }
}
