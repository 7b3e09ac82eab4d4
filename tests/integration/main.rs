//! The library's integration tests, one binary (as ripgrep has): each file a module, the
//! helpers shared through `common`. Four suites stay binaries of their own because they
//! measure the whole process: `fuzz_inputs`, `fuzz_hostile_metadata` and `llama_decode_alloc`
//! install a counting global allocator, and `model_flops` reads the process-wide FLOP counter.

#[path = "../common/mod.rs"]
mod common;

mod align_procrustes;
mod align_weights;
mod causal_lm;
mod data_tokenizers;
mod fuzz_folders;
mod generate_job;
mod gguf_iquants;
mod gguf_kquants;
mod gguf_write;
mod hf_export_llama;
mod hf_shards;
mod init_orthogonal;
mod init_toolkit;
mod llama_batch;
mod llama_declared_config;
mod llama_gguf_types;
mod llama_kv_f16;
mod llama_reference;
mod llama_tokenizer;
mod model_config;
mod model_eval;
mod model_frozen;
mod model_smoke;
mod model_thread_invariance;
mod model_torch_reference;
mod model_variants;
mod mqar_generator;
mod nn_attention;
mod nn_linear_attention;
mod nn_llama_kernels;
mod nn_qmatvec;
mod params_accounting;
mod quant_gguf;
mod quant_gptq;
mod quant_hf_source;
mod quant_mix_llama_cpp;
mod quant_online;
mod quantize_rtn;
mod rotate_fold_control;
mod rotate_hadamard;
mod rotate_heads;
mod rotate_invariance;
mod rotate_outputs;
mod theory_measures;
mod train_adamw;
mod train_frozen;
mod train_gpt_adamw;
mod train_loop;
