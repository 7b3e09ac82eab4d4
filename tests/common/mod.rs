//! Shared helpers of the model-based tests: where the SmolLM2 GGUF is, and what to do when it
//! is missing (fail under CI, otherwise note and skip); the PyTorch GPT fixtures.
#![allow(dead_code)]

pub mod gpt_fixture;
pub mod tiny_llama;

use std::path::PathBuf;

/// The repository's root (the workspace folder), from either crate's tests.
pub fn repo_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if here.join("Cargo.lock").is_file() {
        here
    } else {
        here.parent().map(PathBuf::from).unwrap_or(here)
    }
}

/// The test model's path, or `None` (with a note) when it is absent outside CI.
pub fn smollm2() -> Option<PathBuf> {
    let p = std::env::var_os("ORTHOFORMER_SMOLLM2")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    if p.is_file() {
        return Some(p);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{} is missing under CI: run scripts/fetch_smollm2.sh",
            p.display()
        );
    }
    eprintln!(
        "note: {} is missing; skipping (run scripts/fetch_smollm2.sh)",
        p.display()
    );
    None
}
