//! A tokenizer run by Hugging Face's `tokenizers` crate from a `tokenizer.json` document: the
//! byte-level BPE trained here (`bpe`), one a GPT's data was prepared with, and a pretrained
//! model's (its own `tokenizer.json`, or the document `model::llama::tokenizer` assembles from
//! GGUF metadata). One wrapper for all of them, so every stack encodes and decodes through
//! the same calls: no special tokens are added when encoding and none are skipped when
//! decoding.

use tokenizers::Tokenizer as Inner;

use super::invalid;
use crate::Result;
use crate::io::guard::guarded;

/// The dependency [`guarded`] names.
const TOKENIZERS: &str = "the tokenizers library";

/// The end-of-text and end-of-turn markers a vocabulary may hold: generation stops after
/// any of them that the tokenizer has as a token.
pub const END_MARKERS: [&str; 4] = ["<|endoftext|>", "<|im_end|>", "</s>", "<|eot_id|>"];

/// A `tokenizers` tokenizer.
#[derive(Clone)]
pub struct HfTokenizer {
    inner: Inner,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HfTokenizer(vocab {})", self.vocab_size())
    }
}

impl HfTokenizer {
    /// Wraps a tokenizer built in this crate (BPE training).
    pub(crate) fn from_inner(inner: Inner) -> Self {
        HfTokenizer { inner }
    }

    /// Loads a `tokenizer.json` string.
    pub fn from_json(json: &str) -> Result<Self> {
        Self::parse(json).map_err(|why| invalid(format!("tokenizer.json does not parse: {why}")))
    }

    /// Loads a `tokenizer.json` string, or says why it cannot be loaded (a document the
    /// `tokenizers` crate would panic on is refused first).
    pub fn parse(json: &str) -> std::result::Result<Self, String> {
        crate::io::tokenizer_json::check(json)?;
        let inner = guarded("loading tokenizer.json", TOKENIZERS, || {
            Inner::from_bytes(json.as_bytes())
        })?
        .map_err(|e| e.to_string())?;
        Ok(HfTokenizer { inner })
    }

    /// The `tokenizer.json` text.
    pub fn to_json(&self) -> Result<String> {
        self.inner
            .to_string(false)
            .map_err(|e| invalid(format!("serialising the tokenizer: {e}")))
    }

    /// Number of tokens, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Token ids of `text` (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = guarded("tokenizing", TOKENIZERS, || self.inner.encode(text, false))
            .map_err(invalid)?
            .map_err(|e| invalid(format!("tokenizing failed: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The text of `ids`, special tokens kept (invalid UTF-8 from a partial byte sequence
    /// becomes U+FFFD). An id outside the vocabulary is an error.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let size = self.vocab_size();
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= size) {
            return Err(invalid(format!(
                "token id {bad} is outside the {size}-token vocabulary of the tokenizer"
            )));
        }
        guarded("detokenizing", TOKENIZERS, || self.inner.decode(ids, false))
            .map_err(invalid)?
            .map_err(|e| invalid(format!("detokenizing failed: {e}")))
    }

    /// The id of the token written `token`, if the vocabulary has it.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The token with id `id`, if there is one.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The vocabulary, token to id (added tokens included).
    pub fn vocab(&self) -> std::collections::HashMap<String, u32> {
        self.inner.get_vocab(true)
    }
}
