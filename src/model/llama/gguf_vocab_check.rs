//! The GGUF tokenizer written from a Hugging Face folder, read back before the file is
//! committed: the file's tokenizer (as this crate's engine, like llama.cpp, builds it from the
//! `tokenizer.ggml.*` keys) must hold every token of the folder's `tokenizer.json` at the same
//! id and turn a probe text into the same ids and back into the same text. A conversion that
//! lost, doubled or reordered a token, or kept an option the GGUF tokenizer cannot run, is
//! refused naming the first difference, never written.

use crate::data::Tokenizer;

/// Text the two tokenizers must agree on: ASCII words and punctuation, digits, runs of spaces
/// and newlines, accented Latin, Greek, CJK, an emoji and a combining mark.
pub const PROBE: &str = "The quick brown fox, 1234567 jumps!  Twice\n\n\tover it's \
    naïve café — Ελληνικά 日本語のテキスト 🙂 e\u{301} end.";

/// Why `written` (the tokenizer read back from the file) differs from `source` (the
/// folder's), if it does: a token at some id, or the ids or text of [`PROBE`] and `extra`.
pub fn difference(source: &Tokenizer, written: &Tokenizer, extra: &str) -> Option<String> {
    if written.vocab_size() < source.vocab_size() {
        return Some(format!(
            "it holds {} tokens where tokenizer.json has {}",
            written.vocab_size(),
            source.vocab_size()
        ));
    }
    if let Some(id) = (0..source.vocab_size() as u32)
        .find(|&id| source.id_to_token(id) != written.id_to_token(id))
    {
        return Some(format!(
            "token {id} is {:?} in the file and {:?} in tokenizer.json",
            written.id_to_token(id).unwrap_or_default(),
            source.id_to_token(id).unwrap_or_default()
        ));
    }
    for text in [PROBE, extra] {
        let (a, b) = match (source.encode(text), written.encode(text)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return Some(format!("the probe text fails: {e}")),
        };
        if a != b {
            let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            return Some(format!(
                "the probe text becomes other ids (first difference at token {at}: {:?} in the \
                 file, {:?} in tokenizer.json)",
                b.get(at),
                a.get(at)
            ));
        }
        if written.decode(&b).ok() != source.decode(&a).ok() {
            return Some("the probe text's ids decode to another text".into());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::corpus::TINY_SHAKESPEARE;
    use crate::data::tokenizer::TokenizerKind;

    #[test]
    fn the_same_tokenizer_passes_and_another_is_named() {
        let text = &TINY_SHAKESPEARE[..20_000];
        let a = Tokenizer::train(TokenizerKind::Bpe, text, 300).unwrap();
        let b = Tokenizer::train(TokenizerKind::Bpe, text, 300).unwrap();
        assert_eq!(difference(&a, &b, "more text"), None);
        let other =
            Tokenizer::train(TokenizerKind::Bpe, &TINY_SHAKESPEARE[20_000..40_000], 300).unwrap();
        let why = difference(&a, &other, "").unwrap();
        assert!(why.contains("token"), "{why}");
        let small = Tokenizer::train(TokenizerKind::Bpe, text, 280).unwrap();
        assert!(
            difference(&a, &small, "")
                .unwrap()
                .contains("holds 280 tokens")
        );
    }
}
