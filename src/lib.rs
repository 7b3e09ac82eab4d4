//! Orthoformer: transformers with frozen random orthogonal query/key projections, and the
//! toolkit around them (initialisation, attention variants, accounting, training, and the
//! orthogonal rotation and quantisation of pretrained Llama-style models).
//!
//! **Start from the [`prelude`]**: `use orthoformer::prelude::*;` brings the types and entry
//! points a user needs (a GPT and its configuration, training sessions, evaluation and
//! generation, pretrained Llama-family models, initialisation, rotation, quantisation), each
//! with a runnable example. The repository's `examples/` folder holds whole programs built
//! on it: training a small model, generating from a GGUF file, rotating and checking a model,
//! and initialising with every method (`cargo run --release --example train_shakespeare`).
//!
//! Every fallible call returns [`Result`], whose [`Error`] says in one line what was wrong and
//! what to do.
//!
//! The modules below the prelude are the toolkit's machinery, shared with the command line
//! (`cli/`), the Python package (`python/`), the tests and the benchmarks. They are reachable
//! but hidden from this documentation and are no stable API; `docs/ARCHITECTURE.md` maps
//! them. Dependencies between them point one way: `io -> init -> nn -> data -> model ->
//! infer -> train -> export/rotate/quant -> bench/experiments/analysis`.
//!
//! Dimension letters, used in shape comments everywhere: `B` batch, `T` sequence length,
//! `C` model width (`d_model`), `H` heads, `D` head width (`d_k`), `V` vocabulary,
//! `L` layers, `F` feed-forward width.

#[doc(hidden)]
pub mod analysis;
#[doc(hidden)]
pub mod bench;
#[doc(hidden)]
pub mod data;
#[doc(hidden)]
pub mod error;
#[doc(hidden)]
pub mod experiments;
#[doc(hidden)]
pub mod export;
#[doc(hidden)]
pub mod infer;
#[doc(hidden)]
pub mod init;
#[doc(hidden)]
pub mod io;
#[doc(hidden)]
pub mod model;
#[doc(hidden)]
pub mod nn;
pub mod prelude;
#[doc(hidden)]
pub mod quant;
#[doc(hidden)]
pub mod rotate;
#[doc(hidden)]
pub mod stats;
#[doc(hidden)]
pub mod train;

pub use error::{Error, Result};
