//! Layers with written forward and backward passes, on flat `f32` buffers.
//!
//! Conventions (llm.c's): arguments are ordered outputs, inputs, dimensions; backward
//! functions *accumulate* (`+=`) into gradient buffers, which the caller zeroes once per step.

pub mod matmul;
