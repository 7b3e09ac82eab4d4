//! The one tokenizer type of every model, trained here or pretrained: character level or
//! byte-level BPE trained here, a Hugging Face `tokenizer.json` (one a GPT's data was prepared
//! with, a tiktoken encoding arriving converted to one, or a pretrained model's), or none at
//! all (ids only); and the unit its bits-per-X figure is measured in. Generation and
//! evaluation read text through it alike for both model families (`infer::text_model`).

use super::char_level::CharTokenizer;
use super::hf::{END_MARKERS, HfTokenizer};
use super::ids::IdsTokenizer;
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
    /// Every kind, as [`TokenizerKind::name`] spells it.
    pub const NAMES: [&'static str; 2] = ["char", "bpe"];

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

impl std::str::FromStr for TokenizerKind {
    type Err = crate::Error;

    /// `char` or `bpe`; anything else names the `tokenizer` field.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "char" => Ok(TokenizerKind::Char),
            "bpe" => Ok(TokenizerKind::Bpe),
            other => Err(super::invalid(format!(
                "`tokenizer` {other:?}: use char or bpe"
            ))),
        }
    }
}

/// A tokenizer.
#[derive(Debug, Clone)]
pub enum Tokenizer {
    /// Character level.
    Char(CharTokenizer),
    /// Byte-level BPE trained here.
    Bpe(Box<HfTokenizer>),
    /// Any Hugging Face `tokenizer.json`: the one a GPT's data was tokenized with (`python -m
    /// orthoformer.prepare`; `tiktoken` names the tiktoken encoding it was converted from), or
    /// a pretrained model's.
    Hf {
        /// The tokenizer.
        tokenizer: Box<HfTokenizer>,
        /// The tiktoken encoding's name (`gpt2`, ...), when it came from one.
        tiktoken: Option<String>,
    },
    /// Token ids without a tokenizer (text is the ids in decimal).
    Ids(IdsTokenizer),
}

impl Tokenizer {
    /// Builds a tokenizer of `kind` from `text`; `vocab_size` is the BPE target size.
    pub fn train(kind: TokenizerKind, text: &str, vocab_size: usize) -> Result<Self> {
        Ok(match kind {
            TokenizerKind::Char => Tokenizer::Char(CharTokenizer::train(text)),
            TokenizerKind::Bpe => Tokenizer::Bpe(Box::new(super::bpe::train(text, vocab_size)?)),
        })
    }

    /// A pretrained model's tokenizer (no tiktoken name).
    pub fn pretrained(tokenizer: HfTokenizer) -> Self {
        Tokenizer::Hf {
            tokenizer: Box::new(tokenizer),
            tiktoken: None,
        }
    }

    /// The `tokenizers` tokenizer behind a BPE or Hugging Face tokenizer.
    pub fn hf(&self) -> Option<&HfTokenizer> {
        match self {
            Tokenizer::Bpe(t) | Tokenizer::Hf { tokenizer: t, .. } => Some(t),
            Tokenizer::Char(_) | Tokenizer::Ids(_) => None,
        }
    }

    /// Its kind, for the tokenizers trained here (`None` for one brought along).
    pub fn kind(&self) -> Option<TokenizerKind> {
        match self {
            Tokenizer::Char(_) => Some(TokenizerKind::Char),
            Tokenizer::Bpe(_) => Some(TokenizerKind::Bpe),
            Tokenizer::Hf { .. } | Tokenizer::Ids(_) => None,
        }
    }

    /// Its name in reports: `char`, `bpe`, `hf`, `tiktoken:NAME` or `ids`.
    pub fn name(&self) -> String {
        match self {
            Tokenizer::Char(_) | Tokenizer::Bpe(_) => self.kind().map_or("", |k| k.name()).into(),
            Tokenizer::Hf {
                tiktoken: Some(n), ..
            } => format!("tiktoken:{n}"),
            Tokenizer::Hf { .. } => "hf".into(),
            Tokenizer::Ids(_) => "ids".into(),
        }
    }

    /// What bits-per-X is counted per: "character", "byte" or (ids only) "token".
    pub fn unit(&self) -> &'static str {
        match self {
            Tokenizer::Char(_) => "character",
            Tokenizer::Bpe(_) | Tokenizer::Hf { .. } => "byte",
            Tokenizer::Ids(_) => "token",
        }
    }

    /// Number of tokens (the model's `vocab_size`).
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Char(t) => t.vocab_size(),
            Tokenizer::Bpe(t) | Tokenizer::Hf { tokenizer: t, .. } => t.vocab_size(),
            Tokenizer::Ids(t) => t.vocab_size(),
        }
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match self {
            Tokenizer::Char(t) => t.encode(text),
            Tokenizer::Bpe(t) | Tokenizer::Hf { tokenizer: t, .. } => t.encode(text),
            Tokenizer::Ids(t) => t.encode(text),
        }
    }

    /// The text of `ids`.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match self {
            Tokenizer::Char(t) => t.decode(ids),
            Tokenizer::Bpe(t) | Tokenizer::Hf { tokenizer: t, .. } => t.decode(ids),
            Tokenizer::Ids(t) => t.decode(ids),
        }
    }

    /// The id of the token written `token`, if the vocabulary has it (a character tokenizer's
    /// tokens are its characters; ids have no written form).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        match self {
            Tokenizer::Char(t) => {
                let mut chars = token.chars();
                let (Some(_), None) = (chars.next(), chars.next()) else {
                    return None;
                };
                t.encode(token).ok().and_then(|ids| ids.first().copied())
            }
            Tokenizer::Bpe(t) | Tokenizer::Hf { tokenizer: t, .. } => t.token_to_id(token),
            Tokenizer::Ids(_) => None,
        }
    }

    /// The token with id `id`, if there is one (ids have no written form).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        match self {
            Tokenizer::Char(t) => t.decode(&[id]).ok(),
            Tokenizer::Bpe(t) | Tokenizer::Hf { tokenizer: t, .. } => t.id_to_token(id),
            Tokenizer::Ids(_) => None,
        }
    }

    /// Where `other` differs from this tokenizer (its kind, vocabulary size, the first id
    /// whose token differs, or the ids it turns a probe text into: the same tokens under other
    /// merges, normalizer or pre-tokenizer split text otherwise), if it does: the check every
    /// command that compares two models' outputs on one text makes before it trusts their
    /// token ids to line up.
    pub fn difference(&self, other: &Tokenizer) -> Option<String> {
        self.vocabulary_difference(other)
            .or_else(|| self.probe_difference(other))
    }

    /// Where `other`'s kind, size or tokens differ from this tokenizer's.
    fn vocabulary_difference(&self, other: &Tokenizer) -> Option<String> {
        if self.unit() != other.unit() {
            return Some(format!(
                "it is a {} tokenizer where the other is a {} one",
                other.name(),
                self.name()
            ));
        }
        if self.vocab_size() != other.vocab_size() {
            return Some(format!(
                "its vocabulary has {} tokens where the other's has {}",
                other.vocab_size(),
                self.vocab_size()
            ));
        }
        (0..self.vocab_size() as u32)
            .find(|&id| self.id_to_token(id) != other.id_to_token(id))
            .map(|id| {
                format!(
                    "its token {id} is {:?} where the other's is {:?}",
                    other.id_to_token(id).unwrap_or_default(),
                    self.id_to_token(id).unwrap_or_default()
                )
            })
    }

    /// Where `other` turns a text into other ids than this tokenizer does: the probe text, then
    /// each token's own text (a merge one has and the other lacks shows in the token it makes).
    fn probe_difference(&self, other: &Tokenizer) -> Option<String> {
        let probe = crate::model::llama::gguf_vocab_check::PROBE.to_string();
        let own = (0..self.vocab_size() as u32).filter_map(|id| self.decode(&[id]).ok());
        for text in std::iter::once(probe).chain(own) {
            let shown: String = text.chars().take(40).collect();
            match (self.encode(&text), other.encode(&text)) {
                (Ok(a), Ok(b)) if a != b => {
                    let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                    return Some(format!(
                        "its tokens are the same but it splits the text {shown:?} otherwise (its \
                         merges, normalizer or pre-tokenizer differ; first difference at token \
                         {at}: {:?} where the other's is {:?})",
                        b.get(at),
                        a.get(at)
                    ));
                }
                (Ok(_), Err(_)) | (Err(_), Ok(_)) => {
                    return Some(format!(
                        "its tokens are the same but only one of the two tokenizes the text \
                         {shown:?}"
                    ));
                }
                _ => {}
            }
        }
        None
    }

    /// The ids of the end-of-text and end-of-turn markers the vocabulary holds
    /// (`<|endoftext|>`, `<|im_end|>`, `</s>`, `<|eot_id|>`): generation stops after any of them.
    pub fn end_ids(&self) -> Vec<u32> {
        END_MARKERS
            .iter()
            .filter_map(|m| self.token_to_id(m))
            .collect()
    }

    /// Units (characters, bytes or ids) in `text`, the denominator of bits per unit.
    pub fn units_in(&self, text: &str) -> usize {
        match self {
            Tokenizer::Char(_) => text.chars().count(),
            Tokenizer::Bpe(_) | Tokenizer::Hf { .. } => text.len(),
            Tokenizer::Ids(_) => text.split_whitespace().count(),
        }
    }

    /// Characters (char tokenizer), bytes (BPE, Hugging Face) or tokens (ids only) per token of `text`, which is `n_tokens`
    /// tokens long: what turns a loss per token into bits per unit of text.
    pub fn units_per_token(&self, text: &str, n_tokens: usize) -> f64 {
        self.units_in(text) as f64 / n_tokens.max(1) as f64
    }
}
