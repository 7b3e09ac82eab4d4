//! The ladder's data: the token folder (`train.bin`, `val.bin`, `meta.json`,
//! `tokenizer.json`) and the transfer text, recorded by SHA-256 when the ladder starts and
//! checked against the record whenever it goes on, and their token ranges.
//!
//! `train.bin` is cut once: its first `⌊(1 − heldout_fraction)·n⌋` tokens are the training
//! range every run samples from, the rest is the held-out range rates are chosen on. The
//! transfer text is tokenized by the folder's tokenizer once, at the start, into
//! `OUT/transfer.bin` (little-endian `u32`), which both engines read, so they score the same
//! ids.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::plan::{LadderPlan, Recorded, TINY_SHAKESPEARE};
use crate::Result;
use crate::data::Tokenizer;
use crate::data::hf::HfTokenizer;
use crate::data::token_files;
use crate::train::invalid;

/// The transfer text's tokens in a ladder's folder.
pub const TRANSFER_FILE: &str = "transfer.bin";
/// The tokenizer file of a token folder.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// Half-open token ranges of a ladder's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranges {
    /// Of `train.bin`: what runs train on.
    pub train: (usize, usize),
    /// Of `train.bin`: the held-out tail.
    pub heldout: (usize, usize),
}

/// The cut of `train.bin` (`n` tokens) at `heldout_fraction`.
pub fn ranges(plan: &LadderPlan, n: usize) -> Ranges {
    let cut = ((n as f64) * (1.0 - plan.heldout_fraction)).floor() as usize;
    let cut = cut.min(n);
    Ranges {
        train: (0, cut),
        heldout: (cut, n),
    }
}

/// The first whole windows of `context` inputs among the first `limit` of `len` tokens:
/// `k·context + 1` tokens for the largest `k` that fits (0 when none does).
pub fn whole_windows(len: usize, limit: usize, context: usize) -> usize {
    let k = len.min(limit).saturating_sub(1) / context.max(1);
    if k == 0 { 0 } else { k * context + 1 }
}

/// The plan with its paths made absolute (`data`, and `transfer` unless it is the embedded
/// text), so a ladder goes on from any working folder.
pub fn absolute_paths(mut plan: LadderPlan) -> Result<LadderPlan> {
    let absolute = |field: &str, p: &str| -> Result<String> {
        std::fs::canonicalize(p)
            .map(|a| a.display().to_string())
            .map_err(|e| invalid(format!("the plan's \"{field}\" {p}: cannot be read ({e})")))
    };
    plan.data = absolute("data", &plan.data)?;
    if plan.transfer != TINY_SHAKESPEARE {
        plan.transfer = absolute("transfer", &plan.transfer)?;
    }
    Ok(plan)
}

/// The folder's tokenizer (`tokenizer.json`).
pub fn tokenizer(dir: &Path) -> Result<Tokenizer> {
    let text = crate::io::safe_file::read_regular_text(&dir.join(TOKENIZER_FILE)).map_err(|e| {
        invalid(format!(
            "the plan's \"data\" {} has no readable {TOKENIZER_FILE} ({}): prepare it with \
             python -m orthoformer.prepare",
            dir.display(),
            crate::error::one_line(&e)
        ))
    })?;
    Ok(Tokenizer::pretrained(HfTokenizer::from_json(&text)?))
}

/// The transfer text: the embedded TinyShakespeare or the plan's file.
fn transfer_text(plan: &LadderPlan) -> Result<String> {
    if plan.transfer == TINY_SHAKESPEARE {
        return Ok(crate::data::corpus::TINY_SHAKESPEARE.to_string());
    }
    crate::io::safe_file::read_regular_text(Path::new(&plan.transfer))
}

/// SHA-256 of `files`, one after another, read in blocks.
fn sha256_files(files: &[PathBuf]) -> Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for path in files {
        // A FIFO or a link to a device would block or never end: regular files only.
        let mut f = crate::io::safe_file::open_regular(path)?;
        loop {
            let n = f.read(&mut buf).map_err(|e| crate::Error::io(path, e))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The `sha256` that `meta.json` records for `train.bin` and `val.bin`, if any.
pub fn meta_sha256(dir: &Path) -> Result<Option<String>> {
    let text = crate::io::safe_file::read_regular_text(&dir.join(token_files::META_FILE))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "{}/{} does not parse ({e})",
            dir.display(),
            token_files::META_FILE
        ))
    })?;
    Ok(v.get("sha256").and_then(|s| s.as_str()).map(str::to_string))
}

/// Reads and hashes the plan's data: the record a ladder keeps, and the transfer tokens.
pub fn record(plan: &LadderPlan) -> Result<(Recorded, Vec<u32>)> {
    let dir = Path::new(&plan.data);
    if !token_files::is_token_folder(dir) {
        return Err(invalid(format!(
            "the plan's \"data\" {} is not a token folder (no {}): prepare one with python -m \
             orthoformer.prepare",
            plan.data,
            token_files::META_FILE
        )));
    }
    let meta = token_files::read_meta(dir)?;
    let data_sha256 = sha256_files(&[dir.join("train.bin"), dir.join("val.bin")])?;
    if let Some(m) = meta_sha256(dir)?
        && m != data_sha256
    {
        return Err(invalid(format!(
            "the token files of {} do not match their meta.json (SHA-256 differs): prepare the \
             folder again",
            plan.data
        )));
    }
    let tok = tokenizer(dir)?;
    if tok.vocab_size() > meta.vocab_size {
        return Err(invalid(format!(
            "{}: the tokenizer has {} tokens but meta.json says a vocabulary of {}",
            plan.data,
            tok.vocab_size(),
            meta.vocab_size
        )));
    }
    let text = transfer_text(plan)?;
    let transfer = tok.encode(&text).map_err(|e| {
        invalid(format!(
            "tokenizing the transfer text {}: {}",
            plan.transfer,
            crate::error::one_line(&e)
        ))
    })?;
    let rec = Recorded {
        data_sha256,
        tokenizer_sha256: sha256_files(&[dir.join(TOKENIZER_FILE)])?,
        transfer_sha256: crate::train::checkpoint::sha256_hex(text.as_bytes()),
        vocab_size: meta.vocab_size,
        train_tokens: meta.train_tokens,
        val_tokens: meta.val_tokens,
        transfer_tokens: transfer.len(),
    };
    check_sizes(plan, &rec)?;
    Ok((rec, transfer))
}

/// Checks that every range a run reads holds what it needs: a training window, the curve's
/// `eval_batches · batch` windows of held-out, one window of validation and transfer text.
pub fn check_sizes(plan: &LadderPlan, rec: &Recorded) -> Result<()> {
    let t = plan.context;
    let r = ranges(plan, rec.train_tokens);
    let windows = plan
        .eval_batches
        .checked_mul(plan.batch)
        .and_then(|w| w.checked_mul(t))
        .and_then(|n| n.checked_add(1))
        .ok_or_else(|| invalid("the plan's \"eval_batches · batch · context\" overflows"))?;
    let held = r.heldout.1 - r.heldout.0;
    let need = [
        (
            "the training range of train.bin",
            r.train.1 - r.train.0,
            t + 1,
        ),
        (
            "the held-out range of train.bin (the curve's windows)",
            held,
            windows,
        ),
        ("val.bin", rec.val_tokens, t + 1),
        ("the transfer text", rec.transfer_tokens, t + 1),
    ];
    for (what, have, want) in need {
        if have < want {
            return Err(invalid(format!(
                "{what} holds {have} tokens but the plan needs {want} (context {t}, batch {}, \
                 eval_batches {}): use more data, a larger \"heldout_fraction\" or smaller sizes",
                plan.batch, plan.eval_batches
            )));
        }
    }
    Ok(())
}

/// Writes `tokens` as little-endian `u32` to `path`, atomically.
pub fn write_tokens(path: &Path, tokens: &[u32]) -> Result<()> {
    let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
    crate::io::write_atomic_bytes(path, &bytes)
}

/// Reads `OUT/transfer.bin`, which must hold `count` tokens below `vocab`.
pub fn read_transfer(out: &Path, count: usize, vocab: usize) -> Result<Vec<u32>> {
    let bytes = crate::io::safe_file::read_in(out, TRANSFER_FILE)?;
    if bytes.len() != count.saturating_mul(4) {
        return Err(invalid(format!(
            "{} holds {} bytes, not the {count} tokens the ladder recorded: delete it and run \
             ladder_start (or the engine) again",
            out.join(TRANSFER_FILE).display(),
            bytes.len()
        )));
    }
    let ids: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if ids.iter().any(|&i| i as usize >= vocab) {
        return Err(invalid(format!(
            "{} holds a token outside the vocabulary of {vocab}",
            out.join(TRANSFER_FILE).display()
        )));
    }
    Ok(ids)
}

/// The tokens a Rust run reads: the training and held-out ranges of `train.bin`, `val.bin`
/// and the transfer tokens.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// `train.bin`, whole (the ranges cut it).
    pub train: Vec<u32>,
    /// `val.bin`.
    pub val: Vec<u32>,
    /// The transfer text's tokens.
    pub transfer: Vec<u32>,
    /// The folder's tokenizer.
    pub tokenizer: Tokenizer,
}

/// Loads the ladder's tokens (the folder's files checked against `meta.json`).
pub fn load(plan: &LadderPlan, out: &Path) -> Result<Tokens> {
    let rec = plan.recorded()?;
    let dir = Path::new(&plan.data);
    Ok(Tokens {
        train: token_files::read_split(dir, "train")?,
        val: token_files::read_split(dir, "val")?,
        transfer: read_transfer(out, rec.transfer_tokens, rec.vocab_size)?,
        tokenizer: tokenizer(dir)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_windows_are_counted_within_the_limit() {
        assert_eq!(whole_windows(100, 1000, 8), 12 * 8 + 1);
        assert_eq!(whole_windows(1000, 33, 8), 4 * 8 + 1);
        assert_eq!(whole_windows(8, 1000, 8), 0);
        assert_eq!(whole_windows(9, 1000, 8), 9);
    }
}
