//! The effective parameter multiplier: how many parameters the reference variant (softmax)
//! needs to reach another variant's loss, as a multiple of the other variant's own.
//!
//! At each distinct size `x` of the other variant, with `ȳ(x)` its mean loss over seeds and
//! `L_ref` the reference's fitted law, `N_ref = L_ref⁻¹(ȳ(x))` ([`super::PowerLaw::x_for`])
//! and the multiplier is `N_ref / x`: above 1 the other variant does as well as a larger
//! reference model; below 1 (frozen Q/K behind softmax) it does only as well as a smaller one.
//! When `ȳ(x) ≤ e_ref` the reference never gets there and the multiplier is infinite (`None`
//! as a value).
//!
//! The trend is the least-squares slope of `ln(multiplier)` against `ln x` over the sizes with
//! a finite multiplier: positive means the multiplier grows with size.
//!
//! Intervals come from the bootstrap over seeds of `bootstrap.rs`, paired: a draw picks seeds
//! from the union of both variants' seeds and takes both variants' runs of those seeds, so the
//! seed-to-seed spread the variants share (batches, initialisation) cancels as it does in the
//! paired readings.

use serde::{Deserialize, Serialize};

use super::bootstrap::{check_arguments, distinct_seeds, gather, percentile_interval, resample};
use super::lsq::{distinct_x, fit_checked};
use super::solve::line;
use super::{Interval, Observation, PowerLaw, ScalingError};

/// Keep at most this many per-draw values (draws × sizes) for the percentiles.
const MAX_KEPT: usize = 10_000_000;

/// The multiplier at one size of the other variant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Multiplier {
    /// The other variant's size (parameters).
    pub x: f64,
    /// `N_ref / x`; `None` when the reference's fit never reaches the loss (infinite).
    pub value: Option<f64>,
    /// The percentile bootstrap interval; `None` when fewer than half the draws give a value
    /// at this size or an end is infinite (the reference's curve often never gets there).
    pub interval: Option<Interval>,
    /// Draws (of those whose reference fit succeeded) in which the reference never reached
    /// the loss: counted as an infinite multiplier in the interval.
    pub never_reached: usize,
}

/// Whether the multiplier grows or shrinks with size, by the interval of the slope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trend {
    /// The slope's interval lies above 0: the multiplier grows with size.
    Grows,
    /// The slope's interval lies below 0: the multiplier shrinks with size.
    Shrinks,
    /// The interval contains 0, or there is none.
    Unclear,
}

/// The multiplier at every size of the other variant, with its trend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiplierReport {
    /// One entry per distinct size of the other variant, increasing.
    pub points: Vec<Multiplier>,
    /// Slope of `ln(multiplier)` against `ln x` (`None` with fewer than 2 finite multipliers).
    pub slope: Option<f64>,
    /// Its percentile interval (`None` when fewer than half the draws give a slope).
    pub slope_interval: Option<Interval>,
    /// [`Trend::Grows`] if `slope_interval` is above 0, [`Trend::Shrinks`] if below.
    pub trend: Trend,
    /// The two-sided level of the intervals.
    pub level: f64,
    /// Draws whose reference refit succeeded.
    pub draws: usize,
    /// Draws asked for.
    pub requested: usize,
}

/// The effective parameter multiplier of `other` against `reference` (module doc), with
/// percentile intervals at `level` from `draws` paired bootstrap draws seeded by `seed`.
///
/// Refuses what [`super::fit`] refuses for `reference`, an empty `other` or a bad point in
/// it, fewer than 2 distinct seeds in all, `draws` outside `1..=MAX_DRAWS`, `level` outside
/// (0, 1), and more than 10⁷ kept values (`draws` × sizes).
pub fn multiplier(
    reference: &[Observation],
    other: &[Observation],
    draws: usize,
    seed: u64,
    level: f64,
) -> crate::Result<MultiplierReport> {
    check_arguments(draws, level)?;
    check_other(other)?;
    let law = fit_checked(reference)?.law;
    let xs = distinct_x(other);
    if draws.checked_mul(xs.len()).is_none_or(|n| n > MAX_KEPT) {
        return Err(ScalingError::BadArgument(format!(
            "{draws} draws at {} sizes keep more than {MAX_KEPT} values; use fewer draws",
            xs.len()
        ))
        .into());
    }
    let values = multipliers(&law, other, &xs);
    let finite: Vec<usize> = (0..xs.len()).filter(|&i| values[i].is_finite()).collect();
    let slope = slope_of(&xs, &values, &finite);

    let both: Vec<Observation> = reference.iter().chain(other).copied().collect();
    let seeds = distinct_seeds(&both)?;
    let mut rng = crate::init::rng::seeded(seed);
    let mut per_x: Vec<Vec<f64>> = vec![Vec::new(); xs.len()];
    let mut slopes = Vec::new();
    let mut ok = 0;
    for _ in 0..draws {
        let picked = resample(&seeds, &mut rng);
        let Ok(fit) = fit_checked(&gather(reference, &picked)) else {
            continue;
        };
        ok += 1;
        let drawn = multipliers(&fit.law, &gather(other, &picked), &xs);
        for (kept, &m) in per_x.iter_mut().zip(&drawn) {
            if !m.is_nan() {
                kept.push(m);
            }
        }
        if finite.iter().all(|&i| drawn[i].is_finite())
            && let Some(s) = slope_of(&xs, &drawn, &finite)
        {
            slopes.push(s);
        }
    }

    let enough = |n: usize| n >= 2 && 2 * n >= draws;
    let points = xs
        .iter()
        .zip(values)
        .zip(per_x.iter_mut())
        .map(|((&x, value), kept)| Multiplier {
            x,
            value: value.is_finite().then_some(value),
            never_reached: kept.iter().filter(|m| m.is_infinite()).count(),
            interval: enough(kept.len())
                .then(|| percentile_interval(kept, level))
                .filter(|i| i.lo.is_finite() && i.hi.is_finite()),
        })
        .collect();
    let slope_interval = enough(slopes.len()).then(|| percentile_interval(&mut slopes, level));
    let trend = match slope_interval {
        Some(i) if i.lo > 0.0 => Trend::Grows,
        Some(i) if i.hi < 0.0 => Trend::Shrinks,
        _ => Trend::Unclear,
    };
    Ok(MultiplierReport {
        points,
        slope,
        slope_interval,
        trend,
        level,
        draws: ok,
        requested: draws,
    })
}

/// Refuses an empty `other` or a point that is not finite (x > 0).
fn check_other(other: &[Observation]) -> Result<(), ScalingError> {
    if other.is_empty() {
        return Err(ScalingError::BadArgument(
            "the variant compared with the reference has no observations".into(),
        ));
    }
    match other
        .iter()
        .position(|o| !(o.x.is_finite() && o.x > 0.0 && o.y.is_finite()))
    {
        Some(index) => Err(ScalingError::BadObservation {
            index,
            x: other[index].x,
            y: other[index].y,
        }),
        None => Ok(()),
    }
}

/// At each of `xs`: `law.x_for(mean y of obs at x) / x`; `+∞` where the law never reaches
/// that loss; `NaN` where `obs` has no point at that `x`.
pub(super) fn multipliers(law: &PowerLaw, obs: &[Observation], xs: &[f64]) -> Vec<f64> {
    let (mut sums, mut counts) = (vec![0.0; xs.len()], vec![0usize; xs.len()]);
    for o in obs {
        // `xs` are the distinct x of a superset of `obs`, so the search finds an exact match.
        if let Ok(i) = xs.binary_search_by(|x| x.total_cmp(&o.x)) {
            sums[i] += o.y;
            counts[i] += 1;
        }
    }
    xs.iter()
        .enumerate()
        .map(|(i, &x)| match counts[i] {
            0 => f64::NAN,
            c => law
                .x_for(sums[i] / c as f64)
                .map_or(f64::INFINITY, |n| n / x),
        })
        .collect()
}

/// Least-squares slope of `ln m` against `ln x` over the indices `at`; `None` below 2 points.
pub(super) fn slope_of(xs: &[f64], m: &[f64], at: &[usize]) -> Option<f64> {
    if at.len() < 2 {
        return None;
    }
    let u: Vec<f64> = at.iter().map(|&i| xs[i].ln()).collect();
    let v: Vec<f64> = at.iter().map(|&i| m[i].ln()).collect();
    line(&u, &v).map(|(_, s)| s)
}
