//! Writing models for other tools: a training checkpoint as a Hugging Face GPT-2 folder
//! ([`checkpoint`], with the tensor mapping in `gpt2`) and a (rotated) Llama-family model as
//! a Hugging Face folder or GGUF file ([`llama`]). The model math lives in `model`; this module
//! only maps and writes. [`tiny_llama`] writes a tiny random Llama GGUF to try things on.

pub mod checkpoint;
pub(crate) mod gpt2;
pub mod llama;
pub mod tiny_llama;
