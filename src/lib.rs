//! Orthoformer: transformers with frozen random orthogonal query/key projections, and the
//! toolkit around them (initialisation, attention variants, accounting, training, and the
//! orthogonal rotation of pretrained Llama-style models).
//!
//! Dependencies between modules point one way:
//! `init -> nn -> model -> {train, rotate, analysis}`; the command line is its own crate
//! (`cli/`), built on this library. `io` (file formats, atomic
//! writes) sits below everything.
//!
//! Dimension letters, used in shape comments everywhere: `B` batch, `T` sequence length,
//! `C` model width (`d_model`), `H` heads, `D` head width (`d_k`), `V` vocabulary,
//! `L` layers, `F` feed-forward width.

pub mod analysis;
pub mod bench;
pub mod data;
pub mod error;
pub mod experiments;
pub mod export;
pub mod infer;
pub mod init;
pub mod io;
pub mod model;
pub mod nn;
pub mod rotate;
pub mod stats;
pub mod train;

pub use error::{Error, Result};
