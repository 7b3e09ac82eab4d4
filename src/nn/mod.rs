//! Layers with written forward and backward passes, on flat `f32` buffers.
//!
//! Conventions (llm.c's): arguments are ordered outputs, inputs, dimensions; backward
//! functions *accumulate* (`+=`) into gradient buffers, which the caller zeroes once per step.

pub mod attention;
pub mod attention_cached;
pub(crate) mod attention_decode;
pub(crate) mod attention_decode_f16;
pub mod attention_decode_q;
pub(crate) mod cross_entropy;
pub mod dropout;
pub(crate) mod embedding;
pub mod gelu;
pub mod group_quant;
pub mod hadamard;
pub mod hadamard_rows;
pub mod hadamard_williamson;
pub(crate) mod layernorm;
pub(crate) mod linear;
pub mod linear_attention;
pub mod matmul;
pub(crate) mod matmul_f64;
pub mod qmatmul;
pub mod qmatvec;
pub(crate) mod rmsnorm;
pub mod rope;
pub mod simd;
pub mod srht;
pub(crate) mod swiglu;
pub mod threads;
