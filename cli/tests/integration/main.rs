//! The command line's tests, one binary (as ripgrep has): each file a module, running the
//! built `orthoformer`. `common` is the shared runner and scratch folders, `crash` the
//! crash-injection harness, `models` the library tests' model helpers (SmolLM2, tiny Llama
//! files, PyTorch fixtures).

#[path = "../common/mod.rs"]
mod common;
#[path = "../crash/mod.rs"]
mod crash;
#[path = "../../../tests/common/mod.rs"]
mod models;

mod checkpoint_crash;
mod checkpoint_files;
mod cli_bench;
mod cli_compare;
mod cli_errors;
mod cli_export;
mod cli_init;
mod cli_memory;
mod cli_params;
mod cli_train;
mod eval_probes;
mod finite_outputs;
mod frozen_form;
mod generate_eval_limits;
mod gguf_bad_files;
mod hostile_folders;
mod hostile_round4;
mod hostile_tokenizer;
mod ladder_cli;
mod llama_cli;
mod lr_decay;
mod memory_checks;
mod mqar_cli;
mod mqar_converge;
mod non_finite;
mod output_failures;
mod output_identity;
mod quantize_cli;
mod quantize_fold_cli;
mod quantize_mix_cli;
mod rotate_outputs_cli;
mod theory_cli;
mod token_folder_train;
