//! Scaling-law fits for a size ladder: loss against parameters (or training FLOPs) as a power
//! law with an irreducible term, with bootstrap intervals over seeds, the effective parameter
//! multiplier of one variant against a reference, and the paired readings at equal compute or
//! time. Pure `f64` math; the ladder (`experiments::ladder`) gathers the points and writes the
//! report.
//!
//! The law is
//!
//! ```text
//! y = e + a·x^(−α),   x > 0,   0 ≤ e ≤ min y,   a > 0,   α > 0
//! ```
//!
//! with `e` the irreducible loss: the parametric loss of Hoffmann et al. 2022 (approach 3) in
//! one variable; Kaplan et al. 2020 fit the same power law without `e`. It is fitted by least
//! squares in `y`, unweighted: every point is one run's mean loss over the same evaluation
//! tokens, so the noise is about the same at every size, and a ladder has the same seeds at
//! every rung, so every rung weighs the same. See [`fit`] for the method,
//! [`fit_with_bootstrap`] for the intervals, [`multiplier()`] for the multiplier and
//! [`interpolate`] / [`paired_interval`] for the readings.
//!
//! ```
//! use orthoformer::analysis::scaling::{Observation, PowerLaw, fit};
//! let truth = PowerLaw { e: 1.7, a: 40.0, alpha: 0.3 };
//! let obs: Vec<Observation> = [1e5, 3e5, 1e6, 3e6]
//!     .iter()
//!     .map(|&x| Observation { x, y: truth.at(x), seed: 0 })
//!     .collect();
//! let got = fit(&obs).unwrap().law;
//! assert!((got.alpha - 0.3).abs() < 1e-6 && (got.e - 1.7).abs() < 1e-6);
//! assert!((got.x_for(truth.at(2e5)).unwrap() / 2e5 - 1.0).abs() < 1e-6);
//! ```

mod bootstrap;
mod lsq;
mod multiplier;
mod per_seed;
mod readings;
mod solve;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fixture;

pub use bootstrap::fit_with_bootstrap;
pub use lsq::fit;
pub use multiplier::{Multiplier, MultiplierReport, Trend, multiplier};
pub use per_seed::{
    PerSeedFit, PerSeedMultiplier, SeedEstimates, per_seed_fit, per_seed_multiplier,
};
pub use readings::{interpolate, paired_interval};

use serde::{Deserialize, Serialize};

/// The most bootstrap draws one call accepts: each draw is a full refit, and the draws' values
/// are kept for the percentiles (three `f64` per draw; one per draw and size for the multiplier).
pub const MAX_DRAWS: usize = 100_000;

/// `y = e + a·x^(−alpha)`, for `x > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PowerLaw {
    /// The irreducible term `e`: the loss as `x → ∞`.
    pub e: f64,
    /// The scale `a` (in the units of `x^alpha` times loss).
    pub a: f64,
    /// The exponent `alpha > 0`.
    pub alpha: f64,
}

impl PowerLaw {
    /// The law's value at `x`: `e + a·x^(−alpha)`.
    pub fn at(&self, x: f64) -> f64 {
        self.e + self.a * x.powf(-self.alpha)
    }

    /// The `x` where the law reaches `y`: `x = (a / (y − e))^(1/alpha)`, computed in logs so
    /// that a large `x` (FLOPs) does not overflow on the way. `None` when `y ≤ e` (the law
    /// never gets there), or when the answer or an input is not finite and positive.
    pub fn x_for(&self, y: f64) -> Option<f64> {
        let gap = y - self.e;
        if !(gap > 0.0 && self.a > 0.0 && self.alpha > 0.0) {
            return None;
        }
        let x = ((self.a.ln() - gap.ln()) / self.alpha).exp();
        (x.is_finite() && x > 0.0).then_some(x)
    }
}

/// One measured point: `x` (parameters or FLOPs), `y` (loss), and the seed it came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Parameters or training FLOPs; finite and positive.
    pub x: f64,
    /// The loss; finite.
    pub y: f64,
    /// The seed of the run: the bootstrap resamples seeds, moving all of a seed's points together.
    pub seed: u64,
}

/// A closed interval `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

impl Interval {
    /// Whether `v` lies in `[lo, hi]`.
    pub fn contains(&self, v: f64) -> bool {
        self.lo <= v && v <= self.hi
    }
}

/// A least-squares fit of a [`PowerLaw`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PowerLawFit {
    /// The fitted law.
    pub law: PowerLaw,
    /// The residual sum of squares `Σ (yᵢ − law.at(xᵢ))²`.
    pub rss: f64,
    /// The number of observations fitted.
    pub points: usize,
}

/// A fit with percentile bootstrap intervals on each coefficient (see [`fit_with_bootstrap`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FitWithIntervals {
    /// The fit to all observations.
    pub fit: PowerLawFit,
    /// Interval on `e`.
    pub e: Interval,
    /// Interval on `a`.
    pub a: Interval,
    /// Interval on `alpha`.
    pub alpha: Interval,
    /// The two-sided level of the intervals (0.9 for 90%).
    pub level: f64,
    /// Bootstrap draws whose refit succeeded: the intervals are their percentiles.
    pub draws: usize,
    /// Bootstrap draws asked for (`draws` of them succeeded).
    pub requested: usize,
}

/// What a scaling fit refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScalingError {
    /// An observation's `x` is not finite and positive, or its `y` is not finite.
    #[error(
        "scaling fit: observation {index} has x = {x}, y = {y}; x must be finite and > 0, y finite"
    )]
    BadObservation {
        /// Position in the slice.
        index: usize,
        /// Its x.
        x: f64,
        /// Its y.
        y: f64,
    },
    /// Fewer than three distinct `x`: three coefficients need at least three sizes.
    #[error(
        "scaling fit: {distinct} distinct x values; a law with 3 coefficients needs at least 3"
    )]
    TooFewSizes {
        /// Distinct x values given.
        distinct: usize,
    },
    /// The smallest loss is not positive, so no irreducible term `0 ≤ e ≤ min y` exists.
    #[error("scaling fit: the smallest loss is {min}; losses must be > 0 (0 ≤ e ≤ every loss)")]
    LossNotPositive {
        /// The smallest y.
        min: f64,
    },
    /// No law with `alpha > 0` and `a > 0` fits: the losses do not fall with `x`.
    #[error("scaling fit: the losses do not fall with x, so no power law with alpha > 0 fits")]
    NoFall,
    /// The fitted coefficients overflow (`a = b·x̄^alpha` is not finite).
    #[error("scaling fit: the fitted coefficients are not finite (alpha = {alpha})")]
    NotFinite {
        /// The fitted exponent.
        alpha: f64,
    },
    /// A bootstrap argument is out of range.
    #[error("scaling bootstrap: {0}")]
    BadArgument(String),
    /// The seeds do not allow a bootstrap over seeds.
    #[error("scaling bootstrap: {seeds} distinct seed(s); a bootstrap over seeds needs at least 2")]
    TooFewSeeds {
        /// Distinct seeds given.
        seeds: usize,
    },
    /// Too many bootstrap refits failed for the intervals to describe the fit.
    #[error("scaling bootstrap: {ok} of {requested} draws could be fitted; intervals need half")]
    UnstableBootstrap {
        /// Draws that fitted.
        ok: usize,
        /// Draws asked for.
        requested: usize,
    },
}
