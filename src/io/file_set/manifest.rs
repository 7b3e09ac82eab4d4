//! A set's manifest: the SHA-256 of each of its files, in the format `sha256sum` writes and
//! checks (`HASH  NAME`, one per line), so `sha256sum -c SHA256SUMS` verifies a folder by hand.
//! Written as one more file of the set, it is replaced with the files it describes.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{check_name, malformed};
use crate::Result;

/// SHA-256 of `bytes` in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Whether `s` is a SHA-256 in lowercase hex.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (hex) of a file, read in pieces (a large file is never held whole).
pub fn hash_file(path: &Path) -> std::io::Result<String> {
    // A FIFO or device at a name the manifest lists would block or never end: refused.
    let mut f = crate::io::safe_file::open_regular(path)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

/// The manifest of `files` (`(name, SHA-256 hex)`), in their order.
pub fn manifest_text(files: &[(String, String)]) -> String {
    files
        .iter()
        .map(|(name, hash)| format!("{hash}  {name}\n"))
        .collect()
}

/// Parses a manifest written by [`manifest_text`]; `path` names it in errors.
pub fn parse_manifest(path: &Path, text: &str) -> Result<Vec<(String, String)>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |what: &str| malformed(path, format!("line {}: {what}", i + 1));
        let (hash, name) = line
            .split_once("  ")
            .ok_or_else(|| bad("not `SHA256  NAME`"))?;
        let hex_ok = hash.len() == 64
            && hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex_ok {
            return Err(bad("the hash is not 64 lowercase hex digits"));
        }
        check_name(dir, name)?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(bad("a file is listed twice"));
        }
        out.push((name.to_string(), hash.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip_and_bad_lines_are_errors() {
        let files = vec![
            ("a.bin".to_string(), sha256_hex(b"a")),
            ("state.json".to_string(), sha256_hex(b"")),
        ];
        let text = manifest_text(&files);
        assert_eq!(
            text.lines().nth(1).unwrap(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  state.json"
        );
        let p = Path::new("d/SHA256SUMS");
        assert_eq!(parse_manifest(p, &text).unwrap(), files);
        for bad in [
            "xyz  a.bin\n",
            &format!("{}  ../a\n", sha256_hex(b"")),
            &format!("{} a.bin\n", sha256_hex(b"")),
            &format!("{0}  a\n{0}  a\n", sha256_hex(b"")),
        ] {
            assert!(parse_manifest(p, bad).is_err(), "{bad:?}");
        }
    }
}
