//! Data ready to train on ([`Prepared`]): a UTF-8 text tokenized here and split 90/10
//! ([`prepare`], [`prepare_with`]), or a token folder written by `python -m
//! orthoformer.prepare` ([`Prepared::from_token_folder`]: its own split, its own tokenizer,
//! and the PyTorch trainer's batch windows). Either way, a [`DataRecord`] says where the data
//! came from and identifies it by SHA-256, so a resumed run can check it trains on the same
//! (`reopen_text`, `reopen_folder`).

use std::path::Path;

use super::checkpoint::{self, DataRecord, StateFile};
use super::token_batches::Windows;
use crate::Result;
use crate::data::{Corpus, Split, Tokenizer, TokenizerKind, token_files};

/// Tokenized data ready to train on.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// Train/validation tokens.
    pub split: Split,
    /// Provenance of the data.
    pub data: DataRecord,
    /// How batch windows are drawn: the library's sampler for a text, NumPy's (the PyTorch
    /// trainer's) for a token folder.
    pub windows: Windows,
}

/// Tokenizes `corpus` and splits it, checking that one window of `context + 1` tokens fits.
pub fn prepare(
    corpus: &Corpus,
    kind: TokenizerKind,
    bpe_vocab: usize,
    context: usize,
) -> Result<Prepared> {
    let tokenizer = Tokenizer::train(kind, &corpus.text, bpe_vocab)?;
    prepare_with(corpus, tokenizer, context)
}

/// Like [`prepare`] with a given tokenizer.
pub fn prepare_with(corpus: &Corpus, tokenizer: Tokenizer, context: usize) -> Result<Prepared> {
    let tokens = tokenizer.encode(&corpus.text)?;
    let split = Split::new(&tokens, context)?;
    Ok(Prepared {
        tokenizer,
        split,
        data: data_record(corpus),
        windows: Windows::Library,
    })
}

/// Provenance of a corpus.
pub fn data_record(corpus: &Corpus) -> DataRecord {
    DataRecord {
        source: corpus.source.clone(),
        bytes: corpus.text.len(),
        sha256: checkpoint::sha256_hex(corpus.text.as_bytes()),
    }
}

impl Prepared {
    /// `pub fn from_token_folder(dir: &Path, context: usize) -> Result<Prepared>`: the token
    /// folder `dir` (`python -m orthoformer.prepare`) ready to train on.
    ///
    /// - `meta.json` is checked field by field; `train.bin` and `val.bin` must be regular
    ///   files inside the folder of exactly `tokens · width` bytes; every id must be below
    ///   `vocab_size`, and the files' SHA-256 (read in blocks, `train.bin` then `val.bin`)
    ///   must be `meta.json`'s (`data::token_files::read_folder`);
    /// - the split is the folder's: `train.bin` trains, `val.bin` validates, each holding at
    ///   least one window of `context + 1` tokens ([`Split::from_parts`]);
    /// - the tokenizer is the folder's `tokenizer.json` as [`Tokenizer::Hf`], whose vocabulary
    ///   must be `vocab_size` exactly (`data::token_files::read_tokenizer` says why); a folder
    ///   without one is refused;
    /// - the [`DataRecord`] is the PyTorch trainer's (`orthoformer.tokens.TokenFolder.record`):
    ///   the folder's canonical path, the bytes of both token files, and `meta.json`'s
    ///   (verified) SHA-256;
    /// - batches are drawn as the PyTorch trainer draws them ([`Windows::Numpy`]).
    pub fn from_token_folder(dir: &Path, context: usize) -> Result<Prepared> {
        let canonical = std::fs::canonicalize(dir).map_err(|e| crate::Error::io(dir, e))?;
        if !canonical.is_dir() || !token_files::is_token_folder(&canonical) {
            return Err(super::invalid(format!(
                "{} is not a token folder (no {} in it): make one with python -m \
                 orthoformer.prepare --input TEXT --out DIR",
                dir.display(),
                token_files::META_FILE
            )));
        }
        // The tokenizer first: it is small, and a folder without one is refused before its
        // token files are read.
        let meta = token_files::read_meta(&canonical)?;
        let tokenizer = token_files::read_tokenizer(&canonical, &meta)?;
        let data = token_files::read_folder(&canonical)?;
        if data.meta != meta {
            return Err(super::invalid(format!(
                "{} changed while it was read: read it again when nothing writes to it",
                dir.display()
            )));
        }
        let Some(source) = canonical.to_str() else {
            return Err(super::invalid(format!(
                "the token folder's path {} is not UTF-8, which a checkpoint cannot record: \
                 rename it",
                canonical.display()
            )));
        };
        let width = data.meta.width();
        let bytes = (data.train.len() + data.val.len()).saturating_mul(width);
        let record = DataRecord {
            source: source.to_string(),
            bytes,
            sha256: data.meta.sha256.clone(),
        };
        let split = Split::from_parts(data.train, data.val, context)?;
        Ok(Prepared {
            tokenizer,
            split,
            data: record,
            windows: Windows::Numpy,
        })
    }
}

/// The text a resumed run trains on, checked to be the checkpoint's by its SHA-256, split
/// as the first run split it.
pub(crate) fn reopen_text(
    out: &Path,
    corpus: Corpus,
    st: &StateFile,
    tok: &Tokenizer,
) -> Result<Prepared> {
    if data_record(&corpus).sha256 != st.data.sha256 {
        return Err(super::invalid(format!(
            "the training text {} is not the one checkpoint {} was trained on (SHA-256 \
             differs): restore the original file at that path",
            corpus.source,
            out.display()
        )));
    }
    prepare_with(&corpus, tok.clone(), st.seq_len)
}

/// The token folder `dir` of a resumed run: read and verified as a fresh run reads it, its
/// tokens' SHA-256 equal to the checkpoint's record; the tokenizer stays the checkpoint's.
pub(crate) fn reopen_folder(
    out: &Path,
    dir: &Path,
    st: &StateFile,
    tok: &Tokenizer,
) -> Result<Prepared> {
    let mut prepared = Prepared::from_token_folder(dir, st.seq_len).map_err(|e| {
        super::invalid(format!(
            "checkpoint {} was trained on the token folder {}, which cannot be used: {}",
            out.display(),
            dir.display(),
            crate::error::one_line(&e)
        ))
    })?;
    if prepared.data.sha256 != st.data.sha256 {
        return Err(super::invalid(format!(
            "the token folder {} is not the one checkpoint {} was trained on (SHA-256 of its \
             token files differs): pass the original folder as `data`",
            dir.display(),
            out.display()
        )));
    }
    prepared.tokenizer = tok.clone();
    Ok(prepared)
}
