//! The paired readings at equal compute or equal time: a loss curve read at a given x
//! (FLOPs or seconds) by linear interpolation between evaluations, and the mean of the paired
//! per-seed differences with its Student t interval at any level.
//!
//! The t quantile, mean and standard deviation are the library's (`crate::stats`); this adds
//! only the level, which `stats::paired_interval` fixes at 95%.

use super::Interval;
use crate::stats::{mean, sample_sd, student_t_quantile};

/// The curve `[(x, y)]` (x increasing) read at `x` by linear interpolation between the two
/// points around it; a point's own `y` at its `x`. `None` outside `[first x, last x]`, for an
/// empty curve, or when `x` is not finite: a reading is never extrapolated.
pub fn interpolate(curve: &[(f64, f64)], x: f64) -> Option<f64> {
    let (first, last) = (curve.first()?, curve.last()?);
    if !(x >= first.0 && x <= last.0) {
        return None;
    }
    // The first point at or beyond x; it exists since x ≤ last x.
    let i = curve.partition_point(|p| p.0 < x);
    let (x1, y1) = curve[i];
    if x1 == x || i == 0 {
        return Some(y1);
    }
    let (x0, y0) = curve[i - 1];
    Some(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
}

/// The mean of the paired differences `diffs` and its two-sided Student t interval at `level`
/// (0.95 for 95%): `d̄ ± t((1 + level)/2, n − 1)·s_d/√n`. The interval is `None` with fewer
/// than 2 differences, a level outside (0, 1) or a non-finite difference; the mean is `NaN`
/// for no differences.
pub fn paired_interval(diffs: &[f64], level: f64) -> (f64, Option<Interval>) {
    let m = mean(diffs);
    let n = diffs.len();
    if n < 2 || !(level > 0.0 && level < 1.0) || !m.is_finite() {
        return (m, None);
    }
    let half = student_t_quantile((1.0 + level) / 2.0, (n - 1) as f64) * sample_sd(diffs)
        / (n as f64).sqrt();
    let interval = half.is_finite().then_some(Interval {
        lo: m - half,
        hi: m + half,
    });
    (m, interval)
}
