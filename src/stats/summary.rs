//! Summaries of a sample: its median (benchmark timings) and its moments (the values an
//! initialiser drew).

/// The median of `xs` (the mean of the two middle values for an even count), sorting `xs`
/// in place by [`f64::total_cmp`]. `NaN` for an empty slice.
pub fn median(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        0.5 * (xs[m - 1] + xs[m])
    }
}

/// Mean, population standard deviation, minimum and maximum of a sample.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Moments {
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation (divides by `n`).
    pub std: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// The [`Moments`] of `v`.
pub fn moments(v: &[f64]) -> Moments {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    Moments {
        mean,
        std: var.sqrt(),
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn moments_of_a_sample() {
        let m = moments(&[1.0, 3.0]);
        assert_eq!((m.mean, m.std, m.min, m.max), (2.0, 1.0, 1.0, 3.0));
    }
}
