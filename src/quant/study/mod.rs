//! The quantisation study of `orthoformer quantize`: its configurations and how each sets up
//! the engine ([`config`]), the runs that score them on each text ([`run`]), and the report
//! ([`report`]).

pub mod config;
pub mod report;
pub mod run;

pub use crate::rotate::set::{RotateChoice, RotationSet};
pub use config::{
    QuantConfig, StudySettings, WeightRounding, configure, quarot_grid, quarot_grid_with_fold,
    single_with_baselines,
};
pub use report::{QuantReport, QuantRow, QuantStatsRow};
pub use run::{StudyText, run_study, seeds_of, study_tokens};
