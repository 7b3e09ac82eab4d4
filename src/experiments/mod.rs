//! Experiments built from training runs: the equal-budget comparison of attention variants
//! over paired seeds (`orthoformer compare`), its plan, summary, report and figure. The
//! statistics it reports with live in [`crate::stats`].

pub mod compare;
pub mod ladder;
