//! Benchmarks and measurements: the training-step benchmark (`orthoformer bench`), the
//! pretrained-model benchmark (`bench --model`: decode, prefill, evaluation windows; with
//! `--batch`, batch decoding against `llama-batched-bench`), the
//! predicted and measured peak memory of training (`orthoformer memory`), the initialisation
//! benchmark's report, and the options and reports they share.

pub mod init_bench;
pub mod init_report;
pub mod llama;
pub mod llama_batch;
pub mod llama_batch_report;
pub mod llama_report;
pub mod llama_run;
pub mod llamacpp_native;
pub mod machine_load;
pub mod memory;
pub mod memory_report;
pub mod memory_run;
pub mod options;
pub mod step;
pub(crate) mod step_report;
