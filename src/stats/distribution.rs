//! Distribution functions for checking random initialisers: the one-sample Kolmogorov-Smirnov
//! statistic and its p-value, and the CDFs the tests compare against (normal, uniform,
//! Beta via the regularised incomplete beta function), and a maximum that keeps NaN.

/// The larger of `a` and `b`, NaN if either is: an error maximum must not skip a NaN, as
/// `f64::max` does, or a check of it passes.
pub fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `ln Γ(x)` for `x > 0` (Lanczos approximation, g = 7, 9 terms; ~1e-15 relative).
pub fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (modified Lentz), valid for
/// `x < (a + 1) / (a + b + 2)`.
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=10_000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        // Even step.
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        // Odd step.
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularised incomplete beta function `I_x(a, b)`, the CDF of Beta(a, b) at `x`.
pub fn beta_cdf(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// The regularised lower incomplete gamma function `P(a, x)`.
pub fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let ln_front = -x + a * x.ln() - ln_gamma(a);
    if x < a + 1.0 {
        // Series.
        let (mut ap, mut sum, mut del) = (a, 1.0 / a, 1.0 / a);
        for _ in 0..10_000 {
            ap += 1.0;
            del *= x / ap;
            sum += del;
            if del.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        sum * ln_front.exp()
    } else {
        // Continued fraction for Q(a, x) (modified Lentz).
        const TINY: f64 = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / TINY;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < TINY {
                d = TINY;
            }
            c = b + an / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-16 {
                break;
            }
        }
        1.0 - ln_front.exp() * h
    }
}

/// The standard normal CDF `Φ(x) = (1 + erf(x/√2)) / 2`, with `erf(z) = P(1/2, z²)`.
pub fn normal_cdf(x: f64) -> f64 {
    let p = gamma_p(0.5, 0.5 * x * x);
    if x >= 0.0 {
        0.5 + 0.5 * p
    } else {
        0.5 - 0.5 * p
    }
}

/// The one-sample Kolmogorov-Smirnov statistic `D = sup |F_n(x) − F(x)|` of `samples`
/// against the continuous CDF `cdf`.
pub fn ks_statistic(samples: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    let mut s: Vec<f64> = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in s.iter().enumerate() {
        let f = cdf(x);
        d = d.max((i as f64 + 1.0) / n - f).max(f - i as f64 / n);
    }
    d
}

/// The p-value of a KS statistic `d` from `n` samples: the Kolmogorov distribution's tail
/// `Q(λ) = 2 Σ_{k≥1} (−1)^{k−1} e^{−2k²λ²}` at Stephens' `λ = (√n + 0.12 + 0.11/√n) d`.
pub fn ks_pvalue(d: f64, n: usize) -> f64 {
    let sn = (n as f64).sqrt();
    let lambda = (sn + 0.12 + 0.11 / sn) * d;
    if lambda < 0.2 {
        return 1.0;
    }
    let mut sum = 0.0;
    for k in 1..=200 {
        let k = k as f64;
        let term = (-2.0 * k * k * lambda * lambda).exp();
        sum += if k as u64 % 2 == 1 { term } else { -term };
        if term < 1e-300 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

/// [`ks_statistic`] and [`ks_pvalue`] in one call: the p-value of `samples` against `cdf`.
pub fn ks_test(samples: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    ks_pvalue(ks_statistic(samples, cdf), samples.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Values from scipy.special.betainc / scipy.stats.
        assert!((beta_cdf(2.0, 3.0, 0.4) - 0.5248).abs() < 1e-12);
        assert!((beta_cdf(3.5, 3.5, 0.5) - 0.5).abs() < 1e-12);
        assert!((normal_cdf(1.0) - 0.841_344_746_068_542_9).abs() < 1e-13);
        assert!((normal_cdf(-2.5) - 0.006_209_665_325_776_132).abs() < 1e-14);
        assert!((ln_gamma(10.0) - 362_880f64.ln()).abs() < 1e-12);
        // scipy.stats.kstwobign.sf(0.99119889) = 0.27955379600186203
        assert!((ks_pvalue(0.0099, 10_000) - 0.279_553_796).abs() < 1e-8);
    }
}
