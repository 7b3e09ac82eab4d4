//! Experiments built on the library: the initialisation signal-propagation probe, the MQAR
//! associative-recall benchmark, and the measured checks of seed 003's §6 theory.

pub mod mqar;
pub mod params_report;
pub mod scaling;
pub(crate) mod seed_claims;
pub mod signal_probe;
pub mod theory;
