//! Folders of pre-tokenized data written by `python -m orthoformer.prepare`: `train.bin` and
//! `val.bin` (token ids, little-endian `uint16` or `uint32` by vocabulary size, nanoGPT's
//! layout), `meta.json` (format, dtype, vocabulary, tokenizer, token counts, SHA-256 of
//! `train.bin` followed by `val.bin`) and `tokenizer.json`. A checkpoint trained on such a
//! folder records the folder as its data source; `eval` reads its validation tokens from here.
//!
//! A folder is hostile input (downloaded, or edited by hand): `meta.json` is checked field by
//! field as `orthoformer.tokens.check_meta` checks it; every file must be a regular file that
//! stays inside the folder (no FIFO, device, or link out of it: `io::safe_file`); a token file
//! must be exactly `count · width` bytes before anything is allocated for it, and is read in
//! blocks, never past that size, checking every id against `vocab_size` and hashing as it goes.

use std::io::Read;
use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::hf::HfTokenizer;
use super::invalid;
use super::tokenizer::Tokenizer;
use crate::Result;
use crate::io::{memory, safe_file};

/// The description file of a token folder.
pub const META_FILE: &str = "meta.json";
/// The tokenizer file of a token folder.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// `format` of [`META_FILE`].
pub const FORMAT: &str = "orthoformer-tokens";
/// The largest `meta.json` read (a real one is a few hundred bytes).
pub const MAX_META_BYTES: u64 = 1 << 20;
/// The largest `tokenizer.json` read (Llama 3's is about 9 MB).
pub const MAX_TOKENIZER_BYTES: u64 = 256 << 20;
/// The largest vocabulary a token file can index (`uint32` ids), as `tokens.py`'s `MAX_VOCAB`.
pub const MAX_VOCAB: u64 = 1 << 32;
/// Bytes read at a time (a multiple of both widths).
const BLOCK: usize = 1 << 20;
/// What to do about a lying folder.
const HOW: &str = "prepare the folder again (python -m orthoformer.prepare) or correct meta.json";

/// What `meta.json` says about the token files, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenMeta {
    /// `uint16` or `uint32`.
    pub dtype: String,
    /// Vocabulary size (every id is below it).
    pub vocab_size: usize,
    /// `tokenizer.kind`: `hf`, `tiktoken` or `ids`.
    pub tokenizer_kind: String,
    /// `tokenizer.name` of a tiktoken encoding (empty otherwise).
    pub tokenizer_name: String,
    /// Tokens in `train.bin`.
    pub train_tokens: usize,
    /// Tokens in `val.bin`.
    pub val_tokens: usize,
    /// SHA-256 (lower-case hex) of `train.bin` followed by `val.bin`.
    pub sha256: String,
}

impl TokenMeta {
    /// Bytes per id: 2 (`uint16`) or 4 (`uint32`).
    pub fn width(&self) -> usize {
        if self.dtype == "uint16" { 2 } else { 4 }
    }

    /// The size `split`'s file must have, in bytes (`None`: it overflows).
    fn bytes_of(&self, count: usize) -> Option<u64> {
        (count as u64).checked_mul(self.width() as u64)
    }
}

/// Both splits of a folder, read and verified against its `meta.json`.
#[derive(Debug, Clone)]
pub struct TokenData {
    /// The checked description.
    pub meta: TokenMeta,
    /// `train.bin`'s ids.
    pub train: Vec<u32>,
    /// `val.bin`'s ids.
    pub val: Vec<u32>,
}

/// Whether `path` is a folder holding a [`META_FILE`].
pub fn is_token_folder(path: &Path) -> bool {
    path.is_dir() && path.join(META_FILE).is_file()
}

/// Reads and checks `dir/meta.json`: every field a reader needs, for type, range and
/// agreement with each other (not yet with the files).
pub fn read_meta(dir: &Path) -> Result<TokenMeta> {
    let path = safe_file::inside(dir, META_FILE)?;
    let bytes = read_capped(&path, MAX_META_BYTES)?;
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| {
        invalid(format!(
            "{} does not parse as JSON ({e}); {HOW}",
            path.display()
        ))
    })?;
    check_meta(&doc).map_err(|why| invalid(format!("{}: {why}; {HOW}", path.display())))
}

/// `meta.json`'s fields checked (`tokens.py`'s `check_meta`): the error names the field.
pub fn check_meta(doc: &Value) -> std::result::Result<TokenMeta, String> {
    let m = doc.as_object().ok_or("it is not a JSON object")?;
    let need = |key: &str| m.get(key).ok_or(format!("it has no field {key:?}"));
    let int = |key: &str, lo: u64, hi: u64| -> std::result::Result<u64, String> {
        let v = need(key)?;
        match v.as_u64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(n),
            _ => Err(format!(
                "field {key} must be an integer in {lo}..={hi}, got {v}"
            )),
        }
    };
    if need("format")?.as_str() != Some(FORMAT) {
        return Err(format!(
            "field format must be {FORMAT:?}: not a token folder"
        ));
    }
    if let Some(v) = m.get("version")
        && v.as_u64() != Some(1)
    {
        return Err(format!(
            "field version must be 1 (this build reads version 1), got {v}"
        ));
    }
    let dtype = match need("dtype")?.as_str() {
        Some(d @ ("uint16" | "uint32")) => d.to_string(),
        _ => {
            return Err(format!(
                "field dtype must be uint16 or uint32, got {}",
                m["dtype"]
            ));
        }
    };
    let vocab = int("vocab_size", 1, MAX_VOCAB)?;
    if dtype == "uint16" && vocab > 1 << 16 {
        return Err(format!(
            "field dtype uint16 cannot hold the ids of vocab_size {vocab} (at most 65536)"
        ));
    }
    let max_tokens = usize::MAX as u64;
    let train_tokens = int("train_tokens", 1, max_tokens)? as usize;
    let val_tokens = int("val_tokens", 1, max_tokens)? as usize;
    let sha256 = need("sha256")?.as_str().unwrap_or_default().to_string();
    if !crate::io::file_set::is_sha256_hex(&sha256) {
        return Err("field sha256 must be 64 lower-case hex digits".to_string());
    }
    let tok = match m.get("tokenizer") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(v) => return Err(format!("field tokenizer must be an object, got {v}")),
    };
    let kind = match tok.get("kind").map(|k| k.as_str()) {
        None => "ids",
        Some(Some(k @ ("hf" | "tiktoken" | "ids"))) => k,
        Some(_) => return Err("field tokenizer.kind must be hf, tiktoken or ids".to_string()),
    };
    let name = match tok.get("name") {
        None => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err("field tokenizer.name must be a string".to_string()),
    };
    if kind == "tiktoken" && name.is_empty() {
        return Err("field tokenizer.name must name the tiktoken encoding".to_string());
    }
    Ok(TokenMeta {
        dtype,
        vocab_size: usize::try_from(vocab).map_err(|_| "vocab_size is too large here")?,
        tokenizer_kind: kind.to_string(),
        tokenizer_name: name.to_string(),
        train_tokens,
        val_tokens,
        sha256,
    })
}

/// The tokens of `split` (`train` or `val`) of the folder `dir`, checked against its
/// `meta.json` (file size, ids below the vocabulary). The SHA-256 covers both files, so it
/// is checked by [`read_folder`], not here.
pub fn read_split(dir: &Path, split: &str) -> Result<Vec<u32>> {
    let meta = read_meta(dir)?;
    let count = match split {
        "train" => meta.train_tokens,
        "val" => meta.val_tokens,
        other => return Err(invalid(format!("split {other:?}: use train or val"))),
    };
    let file = open_sized(dir, split, count, &meta)?;
    check_fits(dir, count)?;
    read_ids(file, count, &meta, &mut Sha256::new())
}

/// Both splits of `dir`, every id checked against `vocab_size` and their SHA-256 against
/// `meta.json`'s, read in one pass.
pub fn read_folder(dir: &Path) -> Result<TokenData> {
    let meta = read_meta(dir)?;
    // Both sizes are checked before anything is allocated: a count that lies is named as
    // such, not as a memory shortage.
    let train_file = open_sized(dir, "train", meta.train_tokens, &meta)?;
    let val_file = open_sized(dir, "val", meta.val_tokens, &meta)?;
    let both = meta.train_tokens.checked_add(meta.val_tokens);
    check_fits(dir, both.unwrap_or(usize::MAX))?;
    let mut hash = Sha256::new();
    let train = read_ids(train_file, meta.train_tokens, &meta, &mut hash)?;
    let val = read_ids(val_file, meta.val_tokens, &meta, &mut hash)?;
    let got: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if got != meta.sha256 {
        return Err(invalid(format!(
            "{}: field sha256 is not the SHA-256 of train.bin + val.bin (the files were changed \
             after meta.json was written); {HOW}",
            dir.join(META_FILE).display()
        )));
    }
    Ok(TokenData { meta, train, val })
}

/// Refuses `count` ids (as `u32`) that this machine cannot hold, before allocating them.
fn check_fits(dir: &Path, count: usize) -> Result<()> {
    let what = format!("the {count} token ids of {}", dir.display());
    memory::check_fits(memory::bytes(&[count, 4]), what)?;
    Ok(())
}

/// A token file opened for [`read_ids`]: `dir/<split>.bin`, a regular file inside `dir`
/// of exactly `count · width` bytes.
struct SizedFile {
    file: std::fs::File,
    path: std::path::PathBuf,
    bytes: u64,
}

/// Opens `dir/<split>.bin` and checks its size against `count` ids.
fn open_sized(dir: &Path, split: &str, count: usize, meta: &TokenMeta) -> Result<SizedFile> {
    let path = safe_file::inside(dir, &format!("{split}.bin"))?;
    let file = safe_file::open_regular(&path)?;
    let size = file
        .metadata()
        .map_err(|e| crate::Error::io(&path, e))?
        .len();
    match meta.bytes_of(count) {
        Some(want) if want == size => Ok(SizedFile {
            file,
            path,
            bytes: size,
        }),
        _ => Err(wrong_size(&path, size, count, meta)),
    }
}

/// The error of a token file whose size is not its count of ids.
fn wrong_size(path: &Path, size: u64, count: usize, meta: &TokenMeta) -> crate::Error {
    invalid(format!(
        "{} holds {size} bytes but {META_FILE} says {count} {} tokens; {HOW}",
        path.display(),
        meta.dtype
    ))
}

/// Reads an opened token file in blocks into `hash`, never past its checked size (a file
/// that grew or shrank since is refused), every id below the vocabulary.
fn read_ids(
    sized: SizedFile,
    count: usize,
    meta: &TokenMeta,
    hash: &mut Sha256,
) -> Result<Vec<u32>> {
    let SizedFile {
        file,
        path,
        bytes: want,
    } = sized;
    let wrong_size = |size: u64| wrong_size(&path, size, count, meta);
    let width = meta.width();
    let mut ids = Vec::with_capacity(count);
    // One byte more than promised shows a file that grew since its size was read.
    let mut reader = file.take(want.saturating_add(1));
    let mut block = vec![0u8; BLOCK];
    let mut filled = 0usize;
    loop {
        let n = reader
            .read(&mut block[filled..])
            .map_err(|e| crate::Error::io(&path, e))?;
        filled += n;
        if n != 0 && filled < block.len() {
            continue;
        }
        let whole = filled - filled % width;
        hash.update(&block[..whole]);
        for c in block[..whole].chunks_exact(width) {
            let id = if width == 2 {
                u32::from(u16::from_le_bytes([c[0], c[1]]))
            } else {
                u32::from_le_bytes([c[0], c[1], c[2], c[3]])
            };
            if id as usize >= meta.vocab_size {
                return Err(invalid(format!(
                    "{} holds token id {id} (token {}), not below {META_FILE} field vocab_size \
                     {}: the ids and meta.json disagree; {HOW}",
                    path.display(),
                    ids.len(),
                    meta.vocab_size
                )));
            }
            if ids.len() == count {
                return Err(wrong_size(want.saturating_add(1)));
            }
            ids.push(id);
        }
        block.copy_within(whole..filled, 0);
        filled -= whole;
        if n == 0 {
            break;
        }
    }
    if ids.len() != count || filled != 0 {
        let read = (ids.len() * width + filled) as u64;
        return Err(wrong_size(read));
    }
    Ok(ids)
}

/// Reads a regular file of at most `cap` bytes.
fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let file = safe_file::open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| crate::Error::io(path, e))?;
    if bytes.len() as u64 > cap {
        return Err(invalid(format!(
            "{} is larger than {cap} bytes: not a {META_FILE} this tool reads; {HOW}",
            path.display()
        )));
    }
    Ok(bytes)
}

/// The folder's tokenizer: `dir/tokenizer.json` as [`Tokenizer::Hf`] (with the tiktoken
/// encoding's name when `meta.json` gives one). A folder without one (`tokenizer.kind` `ids`)
/// is refused: a model trained on it could not read or write text.
///
/// Its vocabulary must be exactly `meta.json`'s `vocab_size`, as `orthoformer.tokens` requires:
/// the model's vocabulary is the tokenizer's (a checkpoint is refused otherwise) while the
/// ids were checked against `vocab_size`, so a smaller tokenizer would let ids index past the
/// embedding, and a larger one would build a model of another size than the PyTorch trainer
/// builds from the same folder.
pub fn read_tokenizer(dir: &Path, meta: &TokenMeta) -> Result<Tokenizer> {
    let path = safe_file::inside(dir, TOKENIZER_FILE)?;
    if meta.tokenizer_kind == "ids" || !path.exists() {
        return Err(invalid(format!(
            "{} has no {TOKENIZER_FILE} (tokenizer kind {}): training needs the tokenizer the \
             ids were made with; prepare the folder with --tokenizer (python -m \
             orthoformer.prepare)",
            dir.display(),
            meta.tokenizer_kind
        )));
    }
    let bytes = read_capped(&path, MAX_TOKENIZER_BYTES)?;
    let json = String::from_utf8(bytes)
        .map_err(|_| invalid(format!("{} is not UTF-8; {HOW}", path.display())))?;
    let hf = HfTokenizer::parse(&json)
        .map_err(|why| invalid(format!("{} does not load ({why}); {HOW}", path.display())))?;
    if hf.vocab_size() != meta.vocab_size {
        return Err(invalid(format!(
            "{} field vocab_size {} is not the {} tokens of {TOKENIZER_FILE} beside it; {HOW}",
            dir.join(META_FILE).display(),
            meta.vocab_size,
            hf.vocab_size()
        )));
    }
    let tiktoken = (meta.tokenizer_kind == "tiktoken").then(|| meta.tokenizer_name.clone());
    Ok(Tokenizer::Hf {
        tokenizer: Box::new(hf),
        tiktoken,
    })
}
