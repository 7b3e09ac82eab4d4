//! Weight quantisers that write what a file stores: grids (a study's affine grid, or the GGUF
//! block formats `Q8_0`, `Q6_K`, `Q5_K`, `Q5_1`, `Q5_0`, `Q4_K`, `Q4_1`, `Q4_0`),
//! round-to-nearest with a clipping search or llama.cpp's scale search (with an importance
//! matrix from calibration), GPTQ on calibration Hessians (once, or layer by layer on the
//! quantised model), llama-quantize's per-tensor mixes, and the quantisation of a whole Llama
//! model into the GGUF file people run. Nothing that is not finite goes in or comes out
//! ([`fits`]).
//!
//! Errors are the rotate pipeline's ([`crate::rotate::RotateError`]: one line naming what is
//! wrong).

pub mod calibrate;
pub mod fits;
pub mod gptq;
pub(crate) mod grid;
pub(crate) mod matrix;
pub mod mix;
pub mod model;
pub mod rtn;
pub mod search;
pub mod sequential;
pub mod write;

pub use crate::rotate::RotateError as QuantError;
pub use gptq::{GptqOptions, gptq};
pub use grid::{Format, Params};
pub use matrix::QuantMatrix;
pub use mix::{FileType, TensorOverride, TensorTypes};
pub use rtn::{Clip, rtn};
