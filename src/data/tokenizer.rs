//! The tokenizer a model was trained with: character level or byte-level BPE, behind one
//! type, and the unit its bits-per-X figure is measured in.

use super::bpe::BpeTokenizer;
use super::char_level::CharTokenizer;
use crate::Result;

/// Which tokenizer to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenizerKind {
    /// One token per character; the vocabulary is the training text's characters.
    Char,
    /// Byte-level BPE trained on the corpus to a chosen vocabulary size.
    Bpe,
}

impl TokenizerKind {
    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            TokenizerKind::Char => "char",
            TokenizerKind::Bpe => "bpe",
        }
    }

    /// What bits-per-X is counted per: "character" or "byte".
    pub fn unit(self) -> &'static str {
        match self {
            TokenizerKind::Char => "character",
            TokenizerKind::Bpe => "byte",
        }
    }
}

/// A trained tokenizer.
#[derive(Debug, Clone)]
pub enum Tokenizer {
    /// Character level.
    Char(CharTokenizer),
    /// Byte-level BPE.
    Bpe(Box<BpeTokenizer>),
}

impl Tokenizer {
    /// Builds a tokenizer of `kind` from `text`; `vocab_size` is the BPE target size.
    pub fn train(kind: TokenizerKind, text: &str, vocab_size: usize) -> Result<Self> {
        Ok(match kind {
            TokenizerKind::Char => Tokenizer::Char(CharTokenizer::train(text)),
            TokenizerKind::Bpe => Tokenizer::Bpe(Box::new(BpeTokenizer::train(text, vocab_size)?)),
        })
    }

    /// Its kind.
    pub fn kind(&self) -> TokenizerKind {
        match self {
            Tokenizer::Char(_) => TokenizerKind::Char,
            Tokenizer::Bpe(_) => TokenizerKind::Bpe,
        }
    }

    /// Number of tokens (the model's `vocab_size`).
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Char(t) => t.vocab_size(),
            Tokenizer::Bpe(t) => t.vocab_size(),
        }
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match self {
            Tokenizer::Char(t) => t.encode(text),
            Tokenizer::Bpe(t) => t.encode(text),
        }
    }

    /// The text of `ids`.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match self {
            Tokenizer::Char(t) => t.decode(ids),
            Tokenizer::Bpe(t) => t.decode(ids),
        }
    }

    /// Units (characters or bytes) in `text`, the denominator of bits per unit.
    pub fn units_in(&self, text: &str) -> usize {
        match self {
            Tokenizer::Char(_) => text.chars().count(),
            Tokenizer::Bpe(_) => text.len(),
        }
    }

    /// Characters (char tokenizer) or bytes (BPE) per token of `text`, which is `n_tokens`
    /// tokens long: what turns a loss per token into bits per unit of text.
    pub fn units_per_token(&self, text: &str, n_tokens: usize) -> f64 {
        self.units_in(text) as f64 / n_tokens.max(1) as f64
    }
}
