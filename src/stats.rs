//! The statistics of a comparison over seeds: mean and sample standard deviation, Student's t
//! quantile, the 95% interval of a paired difference, and the point where a loss curve first
//! reaches a target (linear interpolation between evaluations).
//!
//! Pairing: seed `s` gives every variant the same batches and the same initial values of the
//! tensors they share, so `dᵢ = variantᵢ − softmaxᵢ` removes the seed-to-seed spread that both
//! variants share, and the interval is the one-sample t interval of the `dᵢ`:
//! `d̄ ± t(0.975, n−1) · s_d / √n`.

use crate::init::stats::beta_cdf;

/// Arithmetic mean (`NaN` for an empty slice).
pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation, `√(Σ(x − x̄)² / (n − 1))` (`NaN` for fewer than two values).
pub fn sample_sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return f64::NAN;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// The CDF of Student's t distribution with `df` degrees of freedom at `t`:
/// `F(t) = 1 − ½ I_{df/(df+t²)}(df/2, ½)` for `t ≥ 0`, and `F(−t) = 1 − F(t)`.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * beta_cdf(0.5 * df, 0.5, df / (df + t * t));
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The `p` quantile of Student's t with `df > 0` degrees of freedom (`p` in (0, 1)), found by
/// bisection on [`student_t_cdf`] to 1e-12 relative; `NaN` outside that domain.
/// `student_t_quantile(0.975, 1.0)` is 12.7062, `(0.975, 2.0)` 4.3027, `(0.975, 30.0)` 2.0423.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0 && df > 0.0) {
        return f64::NAN;
    }
    if p < 0.5 {
        return -student_t_quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    // Bracket: the t tails are heavy (df = 1 puts the 0.9995 quantile at 637).
    while student_t_cdf(hi, df) < p {
        hi *= 2.0;
        if hi > 1e300 {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if student_t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// The mean of paired differences with its two-sided 95% Student t interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PairedInterval {
    /// Number of pairs `n`.
    pub n: usize,
    /// Mean difference `d̄`.
    pub mean: f64,
    /// Sample standard deviation of the differences (`null` in JSON for one pair).
    pub sd: Option<f64>,
    /// Lower end `d̄ − t·s_d/√n` (`None` with fewer than two pairs).
    pub lo: Option<f64>,
    /// Upper end.
    pub hi: Option<f64>,
}

/// The 95% interval of the mean of `diffs` (`t(0.975, n−1)·s_d/√n` either side).
pub fn paired_interval(diffs: &[f64]) -> PairedInterval {
    let n = diffs.len();
    let m = mean(diffs);
    if n < 2 {
        return PairedInterval {
            n,
            mean: m,
            sd: None,
            lo: None,
            hi: None,
        };
    }
    let sd = sample_sd(diffs);
    let half = student_t_quantile(0.975, (n - 1) as f64) * sd / (n as f64).sqrt();
    PairedInterval {
        n,
        mean: m,
        sd: Some(sd),
        lo: Some(m - half),
        hi: Some(m + half),
    }
}

/// Where the curve `(xs, ys)` first reaches `target` (`y ≤ target`), linearly interpolated
/// between the two evaluations around the crossing; `xs[0]` when the first point already
/// reaches it; `None` when no point does ("not reached"). `xs` and `ys` have equal length.
pub fn first_crossing(xs: &[f64], ys: &[f64], target: f64) -> Option<f64> {
    let i = ys.iter().position(|&y| y <= target)?;
    if i == 0 {
        return Some(xs[0]);
    }
    let (x0, x1, y0, y1) = (xs[i - 1], xs[i], ys[i - 1], ys[i]);
    // y0 > target >= y1 here, so the division is by a positive number.
    Some(x0 + (x1 - x0) * (y0 - target) / (y0 - y1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_published_tables() {
        // Two-sided 95% critical values (e.g. NIST/SEMATECH e-Handbook table 1.3.6.7.2) and a
        // few others, to the digits printed there.
        for (p, df, want) in [
            (0.975, 1.0, 12.706_204_736),
            (0.975, 2.0, 4.302_652_730),
            (0.975, 3.0, 3.182_446_305),
            (0.975, 4.0, 2.776_445_105),
            (0.975, 5.0, 2.570_581_836),
            (0.975, 9.0, 2.262_157_163),
            (0.975, 30.0, 2.042_272_456),
            (0.95, 10.0, 1.812_461_123),
            (0.995, 2.0, 9.924_843_201),
            (0.9995, 1.0, 636.619_248_6),
        ] {
            let got = student_t_quantile(p, df);
            assert!(
                (got - want).abs() < 1e-8 * want,
                "t({p}, {df}) = {got}, want {want}"
            );
            assert!((student_t_quantile(1.0 - p, df) + want).abs() < 1e-8 * want);
        }
        // Large df tends to the normal quantile 1.959964.
        assert!((student_t_quantile(0.975, 1e7) - 1.959_963_985).abs() < 1e-6);
        // df = 1 is the Cauchy distribution: F(t) = ½ + atan(t)/π.
        for t in [-3.0, -0.5, 0.0, 0.7, 10.0] {
            let want = 0.5 + f64::atan(t) / std::f64::consts::PI;
            assert!((student_t_cdf(t, 1.0) - want).abs() < 1e-13);
        }
        assert!(student_t_quantile(0.0, 3.0).is_nan());
        assert!(student_t_quantile(0.5, 0.0).is_nan());
    }

    #[test]
    fn paired_interval_by_hand() {
        // d = (1, 2, 3): mean 2, sd 1, half width 4.302653 / √3 = 2.484138.
        let iv = paired_interval(&[1.0, 2.0, 3.0]);
        assert_eq!(iv.n, 3);
        assert!((iv.mean - 2.0).abs() < 1e-15);
        assert!((iv.sd.unwrap() - 1.0).abs() < 1e-15);
        assert!((iv.lo.unwrap() - (2.0 - 2.484_138_1)).abs() < 1e-6);
        assert!((iv.hi.unwrap() - (2.0 + 2.484_138_1)).abs() < 1e-6);
        // Two pairs: t(0.975, 1) = 12.7062; d = (0.5, 1.5): sd 0.70711, half 6.3531.
        let iv = paired_interval(&[0.5, 1.5]);
        assert!((iv.hi.unwrap() - iv.mean - 6.353_102_4).abs() < 1e-6);
        // One pair has no interval.
        let iv = paired_interval(&[0.25]);
        assert_eq!(
            (iv.n, iv.mean, iv.sd, iv.lo, iv.hi),
            (1, 0.25, None, None, None)
        );
        assert!((sample_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) - 2.138_089_9).abs() < 1e-6);
    }

    #[test]
    fn crossing_interpolates_between_evaluations() {
        let xs = [0.0, 100.0, 200.0, 300.0];
        let ys = [4.0, 3.0, 2.0, 1.5];
        // 2.5 lies halfway between the points at 100 and 200.
        assert_eq!(first_crossing(&xs, &ys, 2.5), Some(150.0));
        // Exactly on a point.
        assert_eq!(first_crossing(&xs, &ys, 2.0), Some(200.0));
        // Reached at the start.
        assert_eq!(first_crossing(&xs, &ys, 9.0), Some(0.0));
        // A quarter of the way from 200 to 300.
        assert!((first_crossing(&xs, &ys, 1.875).unwrap() - 225.0).abs() < 1e-12);
        // Never reached.
        assert_eq!(first_crossing(&xs, &ys, 1.0), None);
        // The first crossing counts, not a later one after a bump.
        let bumpy = [4.0, 2.0, 3.0, 1.0];
        assert_eq!(first_crossing(&xs, &bumpy, 2.5), Some(75.0));
    }
}
