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
//! a Hugging Face folder and runs through the same [`evaluate`] and [`generate_ids`]; see
//! `examples/` for a run on a real model.

pub use crate::data::{Corpus, TokenizerKind};
pub use crate::infer::CausalLm;
pub use crate::infer::eval::{EvalOptions, EvalReport, evaluate};
pub use crate::infer::generate::{SampleOptions, generate_ids, generate_text};
pub use crate::init::options::InitOptions;
pub use crate::init::run::{InitReport, InitRun, run as init};
pub use crate::model::llama::{Llama, load_engine};
pub use crate::model::{AttentionKind, Gpt, GptConfig};
pub use crate::rotate::{RotateJob, RotateReport, Rotation, RotationKind, run as rotate};
pub use crate::train::TrainOptions;
pub use crate::train::observer::Silent;
pub use crate::train::session::{FreshSpec, Session};
pub use crate::{Error, Result};
