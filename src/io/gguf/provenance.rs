//! The record a GGUF file we write keeps of how it was made: keys under `orthoformer.`
//! (llama-quantize keeps `quantize.imatrix.*` for the same purpose), plus
//! `orthoformer.version`. A source that already holds a record under the same prefix (a file
//! this tool wrote before) has it replaced, never doubled: GGUF readers refuse repeated keys.

use sha2::{Digest, Sha256};

use super::Value;

/// The key of the writing tool's version.
pub const VERSION_KEY: &str = "orthoformer.version";

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex SHA-256 of token ids as little-endian u32s.
pub fn ids_sha256(ids: &[u32]) -> String {
    let mut h = Sha256::new();
    for id in ids {
        h.update(id.to_le_bytes());
    }
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Replaces in `meta` every key under `prefix` (and the version) with `pairs`, whose names
/// are relative to `prefix`.
pub fn set_record(meta: &mut Vec<(String, Value)>, prefix: &str, pairs: Vec<(&str, Value)>) {
    meta.retain(|(k, _)| !k.starts_with(prefix) && k != VERSION_KEY);
    meta.push((
        VERSION_KEY.to_string(),
        Value::Str(env!("CARGO_PKG_VERSION").to_string()),
    ));
    meta.extend(pairs.into_iter().map(|(k, v)| (format!("{prefix}{k}"), v)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_sha256_and_a_record_replaces_the_old_one() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(ids_sha256(&[1, 2]), sha256_hex(&[1, 0, 0, 0, 2, 0, 0, 0]));
        let mut meta = vec![
            ("general.name".to_string(), Value::Str("m".into())),
            ("orthoformer.rotate.seed".to_string(), Value::U64(1)),
            (VERSION_KEY.to_string(), Value::Str("0.0.1".into())),
        ];
        set_record(
            &mut meta,
            "orthoformer.rotate.",
            vec![("seed", Value::U64(7))],
        );
        let keys: Vec<&str> = meta.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["general.name", VERSION_KEY, "orthoformer.rotate.seed"]
        );
        assert_eq!(meta[2].1, Value::U64(7));
    }
}
