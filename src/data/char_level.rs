//! The character tokenizer: one token per Unicode scalar value, the vocabulary being the
//! sorted set of characters of the training text (nanoGPT's `shakespeare_char`: 65 tokens
//! for TinyShakespeare).

use std::collections::HashMap;

use super::invalid;
use crate::Result;

/// Characters in id order, and the reverse map.
#[derive(Debug, Clone)]
pub struct CharTokenizer {
    chars: Vec<char>,
    ids: HashMap<char, u32>,
}

impl CharTokenizer {
    /// The vocabulary of `text`: its distinct characters, sorted by code point.
    pub fn train(text: &str) -> Self {
        // A set, not a sorted copy of the text: the copy (4 bytes per character) would stay
        // allocated for the whole run as the vocabulary's capacity.
        let chars: std::collections::BTreeSet<char> = text.chars().collect();
        Self::from_chars(chars.into_iter().collect())
    }

    /// A tokenizer whose token `i` is `chars[i]`; fails on duplicates or an empty list.
    pub fn from_vocab(vocab: &str) -> Result<Self> {
        let chars: Vec<char> = vocab.chars().collect();
        let t = Self::from_chars(chars);
        if t.chars.is_empty() || t.ids.len() != t.chars.len() {
            return Err(invalid(
                "character vocabulary is empty or has duplicates: the checkpoint is corrupt",
            ));
        }
        Ok(t)
    }

    fn from_chars(chars: Vec<char>) -> Self {
        let ids = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as u32))
            .collect();
        CharTokenizer { chars, ids }
    }

    /// The vocabulary as one string, token `i` being its `i`-th character.
    pub fn vocab(&self) -> String {
        self.chars.iter().collect()
    }

    /// Number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.chars.len()
    }

    /// Token ids of `text`; a character outside the vocabulary is an error naming it.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len());
        for (at, c) in text.char_indices() {
            match self.ids.get(&c) {
                Some(&id) => out.push(id),
                None => {
                    return Err(invalid(format!(
                        "character {c:?} (U+{:04X}) at byte {at} is not in the tokenizer's \
                         {}-character vocabulary: use text made of the training characters, or \
                         train with `tokenizer` bpe",
                        c as u32,
                        self.chars.len()
                    )));
                }
            }
        }
        Ok(out)
    }

    /// The text of `ids`; an id outside the vocabulary is an error.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        ids.iter()
            .map(|&i| {
                self.chars.get(i as usize).copied().ok_or_else(|| {
                    invalid(format!(
                        "token id {i} is outside the {}-character vocabulary",
                        self.chars.len()
                    ))
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_sorts() {
        let t = CharTokenizer::train("hello, wörld");
        assert_eq!(t.vocab(), " ,dehlorwö");
        let ids = t.encode("wörld, hello").unwrap();
        assert_eq!(t.decode(&ids).unwrap(), "wörld, hello");
        assert!(t.encode("z").is_err());
        assert!(t.decode(&[99]).is_err());
        let u = CharTokenizer::from_vocab(&t.vocab()).unwrap();
        assert_eq!(u.encode("hello").unwrap(), t.encode("hello").unwrap());
        assert!(CharTokenizer::from_vocab("aa").is_err());
    }
}
