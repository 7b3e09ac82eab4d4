//! Inference: what a trained or pretrained causal language model does once it exists. The
//! [`CausalLm`] interface both model families implement (GPT and Llama), a model with its
//! tokenizer ([`TextModel`]: the prompt and stop rules of both families), evaluation on a text
//! (loss, perplexity, bits per unit), sampling and generation with a KV cache (and
//! `orthoformer generate` as one operation, [`generate_job`]), and the reports of
//! `orthoformer eval`.

pub(crate) mod causal_lm;
pub mod eval;
pub mod eval_job;
pub mod eval_report;
pub mod generate;
pub mod generate_batch;
pub mod generate_job;
pub mod sample;
pub mod text;
pub mod text_model;

pub use causal_lm::{CausalLm, GptCache};
pub use eval::{EvalOptions, EvalReport, evaluate};
pub use generate_job::GenerateJob;
pub use text_model::TextModel;
