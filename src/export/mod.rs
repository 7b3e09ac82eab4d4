//! Writing models for other tools: a training checkpoint as a Hugging Face GPT-2 folder
//! ([`checkpoint`], with the tensor mapping in [`gpt2`]) and a (rotated) Llama-family model as
//! a Hugging Face folder or GGUF file ([`llama`]). The model math lives in `model`; this module
//! only maps and writes.

pub mod checkpoint;
pub mod gpt2;
pub mod llama;
