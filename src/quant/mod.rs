//! Weight quantisers that write what a file stores: grids (a study's affine grid, or the GGUF
//! block formats `Q8_0`, `Q6_K`, `Q5_K`, `Q5_1`, `Q5_0`, `Q4_K`, `Q4_1`, `Q4_0`),
//! round-to-nearest with a clipping search or llama.cpp's scale search (with an importance
//! matrix from calibration), GPTQ on calibration Hessians (once, or layer by layer on the
//! quantised model), llama-quantize's per-tensor mixes, and the quantisation of a whole Llama
//! model into the GGUF file people run. Nothing that is not finite goes in or comes out
//! ([`fits`]).
//!
//! `orthoformer quantize` is [`run::run`] of a [`job::QuantizeJob`]: the study of configurations ([`study`]) or, with
//! `out`, the file ([`file`]); its options are [`options`], its memory check [`memory_need`].
//! Errors are [`QuantError`]: one line naming what is wrong.

pub mod act_stats;
pub mod calibrate;
pub mod calibration_file;
pub mod file;
pub mod fits;
pub mod gptq;
pub(crate) mod grid;
pub mod hessian;
pub(crate) mod iq4;
pub mod job;
pub(crate) mod matrix;
pub mod memory_need;
pub mod mix;
pub mod model;
pub mod options;
pub mod provenance;
pub mod rtn;
pub mod run;
pub mod search;
pub mod sequential;
pub mod simulated;
pub mod study;
pub mod write;

pub use gptq::{GptqOptions, gptq};
pub use grid::{Format, Params};
pub use matrix::QuantMatrix;
pub use mix::{FileType, TensorOverride, TensorTypes};
pub use rtn::{Clip, rtn};

/// Quantisation failed: a bad option, model or value; the message says which.
#[derive(Debug, thiserror::Error)]
pub enum QuantError {
    /// A bad option or model; the message says which.
    #[error("{0}")]
    Invalid(String),
}
