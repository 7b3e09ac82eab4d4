//! The byte-level BPE tokenizer (GPT-2 style), trained and run by Hugging Face's
//! `tokenizers` crate and stored as its standard `tokenizer.json`, so a Python user can load
//! it with `tokenizers.Tokenizer.from_file`.
//!
//! Byte-level means the base alphabet is the 256 bytes: any UTF-8 text encodes, nothing is
//! out of vocabulary, and decoding inverts encoding exactly (no prefix space is added).

use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{Tokenizer as HfTokenizer, TokenizerBuilder};

use super::invalid;
use crate::Result;

/// The smallest vocabulary: the 256 byte tokens.
pub const MIN_VOCAB: usize = 256;

/// A trained byte-level BPE tokenizer.
#[derive(Clone)]
pub struct BpeTokenizer {
    inner: HfTokenizer,
}

impl std::fmt::Debug for BpeTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BpeTokenizer(vocab {})", self.vocab_size())
    }
}

fn byte_level() -> ByteLevel {
    // No prefix space and no offset trimming: decode(encode(x)) == x for every x.
    ByteLevel::new(false, false, true)
}

impl BpeTokenizer {
    /// Learns merges on `text` until the vocabulary has `vocab_size` tokens (at least 256).
    pub fn train(text: &str, vocab_size: usize) -> Result<Self> {
        if vocab_size < MIN_VOCAB {
            return Err(invalid(format!(
                "--vocab-size {vocab_size} is too small for byte-level BPE: use at least \
                 {MIN_VOCAB} (the 256 bytes)"
            )));
        }
        let mut trainer = BpeTrainerBuilder::new()
            .vocab_size(vocab_size)
            .min_frequency(2)
            .show_progress(false)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build();
        let mut tok =
            TokenizerBuilder::<BPE, NormalizerWrapper, ByteLevel, ByteLevel, ByteLevel>::new()
                .with_model(BPE::default())
                .with_normalizer(None)
                .with_pre_tokenizer(Some(byte_level()))
                .with_post_processor(Some(byte_level()))
                .with_decoder(Some(byte_level()))
                .build()
                .map_err(|e| invalid(format!("building the BPE tokenizer: {e}")))?;
        // Lines keep the trainer's word counts small; merges never cross a pre-token anyway.
        tok.train(&mut trainer, text.split_inclusive('\n'))
            .map_err(|e| invalid(format!("training the BPE tokenizer: {e}")))?;
        let inner: HfTokenizer = tok.into();
        Ok(BpeTokenizer { inner })
    }

    /// Loads a `tokenizer.json` string.
    pub fn from_json(json: &str) -> Result<Self> {
        let inner = HfTokenizer::from_bytes(json.as_bytes())
            .map_err(|e| invalid(format!("tokenizer.json does not parse: {e}")))?;
        Ok(BpeTokenizer { inner })
    }

    /// The `tokenizer.json` text.
    pub fn to_json(&self) -> Result<String> {
        self.inner
            .to_string(false)
            .map_err(|e| invalid(format!("serialising the tokenizer: {e}")))
    }

    /// Number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| invalid(format!("BPE encoding failed: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The text of `ids` (invalid UTF-8 from a partial byte sequence becomes U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let size = self.vocab_size();
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= size) {
            return Err(invalid(format!(
                "token id {bad} is outside the {size}-token BPE vocabulary"
            )));
        }
        self.inner
            .decode(ids, false)
            .map_err(|e| invalid(format!("BPE decoding failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trains_to_size_and_round_trips() {
        let text = "the cat sat on the mat. the cat ate the rat.\nthat cat, that mat!\n".repeat(20);
        let t = BpeTokenizer::train(&text, 280).unwrap();
        assert!(
            t.vocab_size() > 256 && t.vocab_size() <= 280,
            "{}",
            t.vocab_size()
        );
        let ids = t.encode(&text).unwrap();
        assert!(
            ids.len() < text.len() / 2,
            "merges should compress: {}",
            ids.len()
        );
        assert_eq!(t.decode(&ids).unwrap(), text);
        let unseen = "Ünïcödé 日本 \t ok";
        assert_eq!(t.decode(&t.encode(unseen).unwrap()).unwrap(), unseen);
        let again = BpeTokenizer::from_json(&t.to_json().unwrap()).unwrap();
        assert_eq!(again.encode(&text).unwrap(), ids);
        assert!(BpeTokenizer::train(&text, 100).is_err());
        assert!(BpeTokenizer::from_json("{").is_err());
    }
}
