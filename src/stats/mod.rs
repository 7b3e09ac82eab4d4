//! The library's statistics, in one place: the distribution functions that check random
//! initialisers (Kolmogorov-Smirnov, normal/Beta/gamma CDFs), the paired intervals of a
//! comparison over seeds, and the summaries of a sample (median, moments) that benchmarks and
//! `orthoformer init` report.

pub(crate) mod distribution;
pub(crate) mod paired;
pub(crate) mod summary;

pub use distribution::{
    beta_cdf, gamma_p, ks_pvalue, ks_statistic, ks_test, ln_gamma, nan_max, normal_cdf,
};
pub use paired::{
    PairedInterval, first_crossing, mean, paired_interval, sample_sd, student_t_cdf,
    student_t_quantile,
};
pub use summary::{Moments, median, moments};
