//! Weight quantisers that write what a file stores: grids (a study's affine grid, or the GGUF
//! block formats `Q8_0`, `Q4_0`, `Q4_1`, `Q4_K`), round-to-nearest with a clipping search,
//! GPTQ on calibration Hessians, and the quantisation of a whole Llama model into the GGUF
//! file people run. Nothing that is not finite goes in or comes out ([`fits`]).
//!
//! Errors are the rotate pipeline's ([`crate::rotate::RotateError`]: one line naming what is
//! wrong).

pub mod calibrate;
pub mod fits;
pub mod gptq;
pub(crate) mod grid;
pub(crate) mod matrix;
pub mod model;
pub mod rtn;
pub mod write;

pub use crate::rotate::RotateError as QuantError;
pub use gptq::{GptqOptions, gptq};
pub use grid::{Format, Params};
pub use matrix::QuantMatrix;
pub use rtn::{Clip, rtn};
