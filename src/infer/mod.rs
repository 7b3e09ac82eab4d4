//! Inference: what a trained or pretrained causal language model does once it exists. The
//! [`CausalLm`] interface both model families implement (GPT and Llama), evaluation on a text
//! (loss, perplexity, bits per unit), sampling and generation with a KV cache, and the
//! reports of `orthoformer eval`.

pub(crate) mod causal_lm;
pub mod eval;
pub mod eval_report;
pub mod generate;
pub mod sample;
pub mod text;

pub use causal_lm::{CausalLm, GptCache};
pub use eval::{EvalOptions, EvalReport, evaluate};
