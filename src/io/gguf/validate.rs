//! The GGUF consistency checks llama.cpp's reader (`gguf_init_from_file_impl`) makes beyond
//! bounds: no metadata key twice, no tensor name twice, every tensor's data offset a multiple
//! of `general.alignment` (default 32), and no two tensors' data overlapping. Called once by
//! the parser, after every tensor's range has been checked to lie inside the file.
//!
//! llama.cpp also requires the tensors to be packed in directory order with no gaps; the
//! GGUF specification does not, so a file with gaps between tensors is accepted here.

use std::collections::HashSet;

use super::directory::TensorInfo;
use super::value::Value;

/// Checks `metadata` and the tensor directory `tensors` against `alignment`; the error says
/// what is wrong, in words.
pub fn check(
    metadata: &[(String, Value)],
    tensors: &[TensorInfo],
    alignment: u64,
) -> Result<(), String> {
    let mut keys = HashSet::with_capacity(metadata.len());
    for (k, _) in metadata {
        if !keys.insert(k.as_str()) {
            return Err(format!("metadata key {k} appears twice"));
        }
    }
    let mut names = HashSet::with_capacity(tensors.len());
    for t in tensors {
        if !names.insert(t.name.as_str()) {
            return Err(format!("tensor {} appears twice", t.name));
        }
        if !t.offset.is_multiple_of(alignment) {
            return Err(format!(
                "tensor {}: data offset {} is not a multiple of the alignment {alignment}",
                t.name, t.offset
            ));
        }
    }
    // Sorted by offset, each tensor must begin at or after the furthest end so far. Empty
    // tensors occupy no bytes and overlap nothing.
    let mut ranges: Vec<(u64, u64, &str)> = tensors
        .iter()
        .map(|t| {
            let size = t.ty.byte_size(t.n_elements).unwrap_or(0);
            (t.offset, t.offset.saturating_add(size), t.name.as_str())
        })
        .filter(|(start, end, _)| end > start)
        .collect();
    ranges.sort_unstable();
    let mut furthest: Option<(u64, u64, &str)> = None;
    for r in ranges {
        if let Some((a0, a1, a)) = furthest
            && r.0 < a1
        {
            let (b0, b1, b) = r;
            return Err(format!(
                "tensors {a} (bytes {a0}..{a1}) and {b} (bytes {b0}..{b1}) overlap in the data \
                 section"
            ));
        }
        if furthest.is_none_or(|f| r.1 > f.1) {
            furthest = Some(r);
        }
    }
    Ok(())
}
