//! The types and entry points a user starts from, in one `use`:
//!
//! ```
//! use orthoformer::prelude::*;
//! ```
//!
//! Each entry point, run (every example is a doctest: small and fast).
//!
//! **A GPT and its configuration** ([`Gpt`], [`GptConfig`], [`AttentionKind`]), scored on a
//! few tokens with [`evaluate`] and sampled from with [`generate_ids`]:
//!
//! ```
//! use orthoformer::prelude::*;
//!
//! let mut cfg = GptConfig::preset("tiny")?;
//! cfg.attention = AttentionKind::Orthogonal; // frozen random orthogonal W_Q, W_K
//! let mut gpt = Gpt::new(cfg, 0)?;
//! let tokens: Vec<u32> = (0..20).map(|i| i % 11).collect();
//! let report = evaluate(&mut gpt, &tokens, &EvalOptions::sliding(8), &mut |_| {})?;
//! assert!(report.loss.is_finite() && report.tokens > 0);
//! let greedy = SampleOptions { max_new_tokens: 5, temperature: 0.0, ..SampleOptions::default() };
//! let new = generate_ids(&mut gpt, &[1, 2, 3], greedy, &[], &mut |_| Ok(()))?;
//! assert_eq!(new.len(), 5);
//! # Ok::<(), orthoformer::Error>(())
//! ```
//!
//! **Training** ([`Session`], [`FreshSpec`], [`TrainOptions`]): a fresh run on the embedded
//! TinyShakespeare for two steps, checkpointed into a folder:
//!
//! ```
//! use orthoformer::prelude::*;
//!
//! let out = std::env::temp_dir().join(format!("orthoformer-doc-train-{}", std::process::id()));
//! let spec = FreshSpec {
//!     model: GptConfig::preset("tiny")?,
//!     model_seed: 0,
//!     options: TrainOptions { steps: 2, batch: 2, eval_every: 2, eval_iters: 1, ..TrainOptions::default() },
//! };
//! let corpus = Corpus::tiny_shakespeare();
//! let mut session = Session::fresh(&corpus, TokenizerKind::Char, 0, spec, &out)?;
//! session.run(None, None, &mut Silent)?;
//! assert_eq!(session.state.step, 2);
//! # std::fs::remove_dir_all(&out).ok();
//! # Ok::<(), orthoformer::Error>(())
//! ```
//!
//! **Initialisation** ([`init`], [`InitOptions`]): one Haar-orthogonal matrix by QR, checked:
//!
//! ```
//! use orthoformer::prelude::*;
//!
//! let options = InitOptions { rows: 16, cols: 8, ..InitOptions::default() };
//! let drawn = init(&options, None, &mut |_| {})?;
//! assert_eq!(drawn.values.len(), 16 * 8);
//! assert!(drawn.report.haar && drawn.report.ortho_error_max.unwrap() < 1e-5);
//! # Ok::<(), orthoformer::Error>(())
//! ```
//!
//! **Rotation of a pretrained model** ([`rotate`], [`RotateJob`], [`Rotation`]): the job is
//! checked before any file is read, and a rotation is orthogonal:
//!
//! ```
//! use orthoformer::prelude::*;
//!
//! let job = RotateJob { model: "model.gguf".into(), ..RotateJob::default() };
//! let refused = rotate(&job, &mut |_, _| {}).unwrap_err().to_string();
//! assert!(refused.starts_with("nothing to do"));
//! let q = Rotation::of_kind(RotationKind::Hadamard, 8, 0)?;
//! let mut rows = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
//! let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
//! let before = norm(&rows);
//! q.apply_rows(&mut rows);
//! assert!((norm(&rows) - before).abs() < 1e-12);
//! # Ok::<(), orthoformer::Error>(())
//! ```
//!
//! **A pretrained Llama-family model** ([`Llama`], [`load_engine`]) loads from a GGUF file or
//! a Hugging Face folder and runs through the same [`evaluate`] and [`generate_ids`]. Here the
//! model is [`write_tiny_llama_gguf`]'s tiny random one (its text is noise); a real model
//! runs the same code (`examples/generate_gguf.rs`):
//!
//! ```
//! use orthoformer::prelude::*;
//!
//! let path = std::env::temp_dir().join(format!("orthoformer-doc-llama-{}.gguf", std::process::id()));
//! write_tiny_llama_gguf(&path, 0)?;
//! let LoadedEngine { mut model, tokenizer, .. } = load_engine(&path)?;
//! let prompt = tokenizer.encode("To be, or not to be")?;
//! let greedy = SampleOptions { max_new_tokens: 8, temperature: 0.0, ..SampleOptions::default() };
//! let new = generate_ids(&mut model, &prompt, greedy, &tokenizer.end_ids(), &mut |_| Ok(()))?;
//! assert!(!new.is_empty() && new.len() <= 8);
//! let _text: String = tokenizer.decode(&new)?;
//! let report = evaluate(&mut model, &prompt, &EvalOptions::default(), &mut |_| {})?;
//! assert!(report.loss.is_finite() && report.tokens == prompt.len() - 1);
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), orthoformer::Error>(())
//! ```
//!
//! **Rotating a pretrained model and checking it** ([`rotate`] with `check`): the residual
//! stream is rotated by an orthogonal matrix after folding the RMSNorm weights, so the
//! rotated model computes the same logits (up to rounding):
//!
//! ```
//! use orthoformer::prelude::*;
//!
//! let dir = std::env::temp_dir();
//! let model = dir.join(format!("orthoformer-doc-rotate-{}.gguf", std::process::id()));
//! let rotated = dir.join(format!("orthoformer-doc-rotated-{}.gguf", std::process::id()));
//! write_tiny_llama_gguf(&model, 0)?;
//! let options = RotateOptions { check_tokens: 64, context: Some(32), ..RotateOptions::default() };
//! let job = RotateJob { model: model.clone(), out: vec![rotated.clone()], check: true, data: None, options };
//! let report = rotate(&job, &mut |_, _| {})?;
//! assert_eq!(report.check_passed, Some(true));
//! assert!(report.check.unwrap().max_abs_logit_diff < 1e-3);
//! # std::fs::remove_file(&model).ok();
//! # std::fs::remove_file(&rotated).ok();
//! # Ok::<(), orthoformer::Error>(())
//! ```
//!
//! **Quantising a model to a GGUF block format** ([`quantize_model`], [`save_quantized_gguf`]):
//! every decoder matrix rounded to nearest onto Q4_0 (GPTQ takes the Hessians of
//! [`calibrate`] instead; [`choose_types`] gives a llama-quantize mix's per-tensor formats for
//! [`QuantPlan::of_types`]), the embedding onto Q8_0, written as a file llama.cpp and
//! [`load_engine`] run; the file computes what the in-memory quantised model does:
//!
//! ```
//! use orthoformer::prelude::*;
//!
//! let dir = std::env::temp_dir();
//! let source = dir.join(format!("orthoformer-doc-quant-src-{}.gguf", std::process::id()));
//! let out = dir.join(format!("orthoformer-doc-quant-{}.gguf", std::process::id()));
//! write_tiny_llama_gguf(&source, 0)?;
//! let loaded = load_model(&source)?;
//! let mut weights = loaded.weights.clone();
//! let n_layer = weights.layers.len();
//! let method = QuantMethod::Rtn(Clip::None);
//! let plan = QuantPlan::uniform(method, QuantFormat::Q4_0, n_layer, Some(QuantFormat::Q8_0));
//! let quantized = quantize_model(&mut weights, &plan, None, &mut |_| {})?;
//! let metadata = loaded.gguf_metadata.as_deref().unwrap_or_default(); // a GGUF source's
//! let file_type = 2; // llama.cpp's MOSTLY_Q4_0
//! save_quantized_gguf(&weights, &quantized, file_type, metadata, None, &out)?;
//! let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
//! assert!(size(&out) * 4 < size(&source));
//! let tokens: Vec<u32> = (0..16).map(|i| i * 7 % 256).collect();
//! let mut file = load_engine(&out)?.model;
//! let mut memory = Llama::new(weights);
//! let on_file = evaluate(&mut file, &tokens, &EvalOptions::default(), &mut |_| {})?;
//! let in_memory = evaluate(&mut memory, &tokens, &EvalOptions::default(), &mut |_| {})?;
//! assert!((on_file.loss - in_memory.loss).abs() < 1e-4);
//! # std::fs::remove_file(&source).ok();
//! # std::fs::remove_file(&out).ok();
//! # Ok::<(), orthoformer::Error>(())
//! ```
//!
//! Whole programs built on these live in the repository's `examples/` folder: training a
//! small model (`train_shakespeare`), generating from a GGUF file (`generate_gguf`), rotating and
//! checking a model (`rotate_check`) and initialising with every method (`init_methods`).

pub use crate::data::{Corpus, Tokenizer, TokenizerKind};
pub use crate::export::tiny_llama::write_tiny_llama_gguf;
pub use crate::infer::CausalLm;
pub use crate::infer::eval::{EvalOptions, EvalReport, evaluate};
pub use crate::infer::generate::{GenerateReport, SampleOptions, generate_ids, generate_text};
pub use crate::init::method::{InitMethod, InitParams};
pub use crate::init::options::InitOptions;
pub use crate::init::run::{InitReport, InitRun, run as init};
pub use crate::model::llama::{
    Llama, LlamaWeights, LoadedEngine, LoadedModel, load_engine, load_model,
};
pub use crate::model::{AttentionKind, Gpt, GptConfig};
pub use crate::quant::calibrate::calibrate;
pub use crate::quant::mix::{FileType, TensorOverride, choose as choose_types};
pub use crate::quant::model::{
    Method as QuantMethod, Plan as QuantPlan, QuantizedModel, quantize_model,
};
pub use crate::quant::write::save_quantized_gguf;
pub use crate::quant::{Clip, Format as QuantFormat, GptqOptions};
pub use crate::rotate::check::Comparison;
pub use crate::rotate::options::RotateOptions;
pub use crate::rotate::{RotateJob, RotateReport, Rotation, RotationKind, run as rotate};
pub use crate::train::observer::Silent;
pub use crate::train::session::{FreshSpec, Session};
pub use crate::train::{MetricRecord, RunState, TrainOptions};
pub use crate::{Error, Result};
