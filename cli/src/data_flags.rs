//! The data flags of `orthoformer train` and `compare` (`--data`, `--tokenizer`,
//! `--vocab-size`): a UTF-8 text tokenized here, or a token folder from `python -m
//! orthoformer.prepare`, which brings its own split and tokenizer (the tokenizer flags are
//! refused with one).

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::common::library_values;
use orthoformer::data::{Corpus, TokenizerKind};
use orthoformer::train::options::tokenizer_choice;
use orthoformer::train::session::{Prepared, prepare};
use orthoformer::train::token_batches::Windows;

/// Which text and tokenizer.
#[derive(Debug, Clone, clap::Args)]
pub struct DataFlags {
    /// Training data: a UTF-8 text file (split 90/10, tokenized here), or a token folder made
    /// by `python -m orthoformer.prepare` (train.bin trains, val.bin validates, its
    /// tokenizer.json is the tokenizer; batches are drawn as `python -m orthoformer.train
    /// --data-dir` draws them) [default: the embedded TinyShakespeare].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Tokenizer: one token per character (char), or byte-level BPE trained on the text (bpe);
    /// not with a token folder, which brings its own [default: char].
    #[arg(long, value_parser = library_values(&TokenizerKind::NAMES, str::parse::<TokenizerKind>))]
    pub tokenizer: Option<TokenizerKind>,
    /// Vocabulary size of the BPE tokenizer (at least 256); not with a token folder
    /// [default: 512].
    #[arg(long)]
    pub vocab_size: Option<usize>,
}

impl DataFlags {
    /// The tokenizer kind and BPE size, checked by the library.
    pub fn tokenizer(&self) -> anyhow::Result<(TokenizerKind, usize)> {
        Ok(tokenizer_choice(self.tokenizer, self.vocab_size)?)
    }

    /// The corpus: `--data` or the embedded TinyShakespeare.
    pub fn corpus(&self) -> anyhow::Result<Corpus> {
        Ok(Corpus::load_or_default(self.data.as_deref())?)
    }

    /// `--data` when it names a folder (a token folder; the library checks that it is one),
    /// refusing the tokenizer flags with it: the folder's ids were made by its own tokenizer.
    pub fn token_folder(&self) -> anyhow::Result<Option<&Path>> {
        let Some(dir) = self.data.as_deref().filter(|d| d.is_dir()) else {
            return Ok(None);
        };
        if self.tokenizer.is_some() || self.vocab_size.is_some() {
            anyhow::bail!(
                "--data {} is a token folder, which brings its own tokenizer (its \
                 tokenizer.json): drop --tokenizer and --vocab-size",
                dir.display()
            );
        }
        Ok(Some(dir))
    }

    /// The data of a fresh run at `context`: the token folder, or the text tokenized with
    /// the tokenizer flags.
    pub fn prepared(&self, context: usize) -> anyhow::Result<Prepared> {
        if let Some(dir) = self.token_folder()? {
            return Prepared::from_token_folder(dir, context)
                .with_context(|| format!("reading the token folder {}", dir.display()));
        }
        let (tokenizer, bpe_vocab) = self.tokenizer()?;
        Ok(prepare(&self.corpus()?, tokenizer, bpe_vocab, context)?)
    }
}

/// The line that names a token folder's data and tokenizer (none for a text).
pub fn folder_line(prepared: &Prepared) -> Option<String> {
    (prepared.windows == Windows::Numpy).then(|| {
        format!(
            "data: token folder {} ({} train, {} validation tokens; {} tokenizer, vocabulary \
             {})",
            prepared.data.source,
            prepared.split.train.len(),
            prepared.split.val.len(),
            prepared.tokenizer.name(),
            prepared.tokenizer.vocab_size()
        )
    })
}
