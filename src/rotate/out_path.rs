//! Claiming the outputs of `rotate` and `quantize` before any work: a bad `out` found after a
//! minute of GPTQ wastes the minute, an `out` that is the model itself (or a folder holding
//! it, or inside it) would replace the source with its own rotation, and a second process
//! writing the same `out` would race this one. The rules are the file-set layer's, one for
//! every writer ([`crate::io::file_set::claim_outputs`]); this file only says what `rotate`
//! and `quantize` read and write.

use std::path::{Path, PathBuf};

use crate::io::file_set::{Claim, Input, Output, claim_outputs};
use crate::io::folder_kind::{self, FolderKind};

/// A path ending in `.gguf` is a GGUF output; anything else a Hugging Face folder.
pub(crate) fn is_gguf(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "gguf")
}

/// The folder `out` is written in (`.` for a bare name).
pub(crate) fn parent_of(out: &Path) -> PathBuf {
    match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Checks and locks every `out` (a path ending in `.gguf` is a file, anything else a Hugging
/// Face folder) against the `model` and the `data` texts read: none may be, hold or lie inside
/// an input or another output, a folder must be new, empty or one `rotate` made, and no other
/// process may be writing it. Reads only metadata, so it runs before the model is loaded; the
/// [`Claim`] is held until the outputs are written.
pub fn claim_outs(model: &Path, data: &[&Path], outs: &[PathBuf]) -> crate::Result<Claim> {
    let mut inputs = vec![("model", model)];
    inputs.extend(data.iter().map(|d| ("data", *d)));
    claim_outs_of(&inputs, outs)
}

/// [`claim_outs`] for any inputs, each named by its field (`model_b`, `data`, ...).
pub fn claim_outs_of(inputs: &[(&str, &Path)], outs: &[PathBuf]) -> crate::Result<Claim> {
    let inputs: Vec<Input<'_>> = inputs.iter().map(|(n, p)| Input::new(n, p)).collect();
    let outputs: Vec<Output<'_>> = outs
        .iter()
        .map(|o| {
            if is_gguf(o) {
                Output::file("out", o)
            } else {
                Output::folder("out", o)
            }
        })
        .collect();
    let claim = claim_outputs(&inputs, &outputs)?;
    for o in outs.iter().filter(|o| !is_gguf(o)) {
        // Another command's folder (a training checkpoint, a download) is never written into.
        folder_kind::check(o, FolderKind::HfLlama)?;
    }
    Ok(claim)
}
