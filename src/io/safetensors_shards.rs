//! Sharded Hugging Face weights: `model.safetensors.index.json` maps every tensor name to the
//! shard file holding it. Each shard is read as hostile as a single `model.safetensors`
//! ([`safe_file::read_in`]: a regular file, a link only when it resolves inside the folder), and
//! the index is checked against the shards before any weight is used: a shard name that is
//! not a plain file name of the folder, a tensor the index lists but its shard lacks, a
//! tensor in a shard the index does not list there, or in two shards, is one line naming it.

use std::collections::BTreeMap;
use std::path::Path;

use super::FormatError;
use super::safe_file;

/// The index file's name.
pub const INDEX: &str = "model.safetensors.index.json";

/// More shards than any published model has; beyond it the index is lying.
const MAX_SHARDS: usize = 4096;

/// Every shard of a folder, checked against its index.
#[derive(Debug)]
pub struct Shards {
    /// `(path for messages, bytes)` of each shard, in the index's order of first mention.
    pub files: Vec<(String, Vec<u8>)>,
    /// Path of the index, for messages about a tensor that is missing from every shard.
    pub index_path: String,
}

fn bad(path: &str, what: String) -> crate::Error {
    FormatError::Malformed {
        path: path.to_string(),
        what,
    }
    .into()
}

/// Whether `name` is a plain file name (no folder part, not `.` or `..`).
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !Path::new(name).is_absolute()
}

/// Reads `dir`'s index and every shard it names, and checks each tensor is in exactly the
/// shard the index gives.
pub fn read(dir: &Path) -> crate::Result<Shards> {
    let index_path = dir.join(INDEX).display().to_string();
    let text = safe_file::read_text_in(dir, INDEX)?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(&index_path, format!("not valid JSON ({e})")))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad(&index_path, "has no \"weight_map\" object".into()))?;
    let mut names: Vec<&str> = Vec::new();
    let mut wanted: BTreeMap<&str, usize> = BTreeMap::new();
    for (tensor, shard) in map {
        let shard = shard.as_str().ok_or_else(|| {
            bad(
                &index_path,
                format!("tensor {tensor}: its shard is not a string"),
            )
        })?;
        if !plain_name(shard) {
            return Err(bad(
                &index_path,
                format!(
                    "tensor {tensor}: shard {shard:?} is not a file of this folder (names with a \
                     folder part or `..` are refused)"
                ),
            ));
        }
        let i = match names.iter().position(|n| *n == shard) {
            Some(i) => i,
            None => {
                names.push(shard);
                names.len() - 1
            }
        };
        wanted.insert(tensor.as_str(), i);
    }
    if names.is_empty() {
        return Err(bad(&index_path, "lists no tensors".into()));
    }
    if names.len() > MAX_SHARDS {
        return Err(bad(
            &index_path,
            format!("names {} shards (at most {MAX_SHARDS})", names.len()),
        ));
    }
    let mut files = Vec::with_capacity(names.len());
    for name in &names {
        let path = dir.join(name).display().to_string();
        let bytes = safe_file::read_in(dir, name)?;
        files.push((path, bytes));
    }
    check(&files, &wanted, &index_path)?;
    Ok(Shards { files, index_path })
}

/// Each shard's tensors against the index: present where it says, nowhere else.
fn check(
    files: &[(String, Vec<u8>)],
    wanted: &BTreeMap<&str, usize>,
    index_path: &str,
) -> crate::Result<()> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, (path, bytes)) in files.iter().enumerate() {
        let st = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| bad(path, format!("not a valid safetensors file: {e}")))?;
        for n in st.names() {
            if let Some(&j) = seen.get(n) {
                return Err(bad(
                    index_path,
                    format!("tensor {n} is in two shards, {} and {path}", files[j].0),
                ));
            }
            match wanted.get(n) {
                Some(&w) if w == i => {}
                Some(&w) => {
                    return Err(bad(
                        index_path,
                        format!(
                            "tensor {n} is in {path}, but the index puts it in {}",
                            files[w].0
                        ),
                    ));
                }
                None => {
                    return Err(bad(
                        index_path,
                        format!("tensor {n} of {path} is not in the index"),
                    ));
                }
            }
            seen.insert(n.to_string(), i);
        }
    }
    if let Some((n, &w)) = wanted.iter().find(|(n, _)| !seen.contains_key(**n)) {
        return Err(bad(
            index_path,
            format!("tensor {n} is missing from its shard {}", files[w].0),
        ));
    }
    Ok(())
}
