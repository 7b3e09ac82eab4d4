//! Training the byte-level BPE tokenizer (GPT-2 style) with Hugging Face's `tokenizers` crate;
//! it runs as an [`HfTokenizer`] and is stored as its standard `tokenizer.json`, so a Python
//! user can load it with `tokenizers.Tokenizer.from_file`.
//!
//! Byte-level means the base alphabet is the 256 bytes: any UTF-8 text encodes, nothing is
//! out of vocabulary, and decoding inverts encoding exactly (no prefix space is added).

use tokenizers::TokenizerBuilder;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;

use super::hf::HfTokenizer;
use super::invalid;
use crate::Result;

/// The smallest vocabulary: the 256 byte tokens.
pub const MIN_VOCAB: usize = 256;

fn byte_level() -> ByteLevel {
    // No prefix space and no offset trimming: decode(encode(x)) == x for every x.
    ByteLevel::new(false, false, true)
}

/// Learns merges on `text` until the vocabulary has `vocab_size` tokens (at least 256).
pub fn train(text: &str, vocab_size: usize) -> Result<HfTokenizer> {
    if vocab_size < MIN_VOCAB {
        return Err(invalid(format!(
            "`vocab_size` {vocab_size} is too small for byte-level BPE: use at least \
             {MIN_VOCAB} (the 256 bytes)"
        )));
    }
    // Each merge needs a pair seen twice, so a text of n bytes yields at most n / 2 merges:
    // a larger request gives the same tokenizer, and sizing the trainer's tables by it
    // (2^64 - 1) would overflow.
    let reachable = MIN_VOCAB.saturating_add(text.len() / 2);
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size.min(reachable))
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
    tok.train(&mut trainer, training_pieces(text))
        .map_err(|e| invalid(format!("training the BPE tokenizer: {e}")))?;
    let inner: tokenizers::Tokenizer = tok.into();
    Ok(HfTokenizer::from_inner(inner))
}

/// The longest piece of text the trainer sees at once, in bytes. Its merge step moves the
/// rest of a pre-token on every merge inside it, so one pre-token of `n` bytes costs `O(n²)`
/// (100 KB without whitespace took 17 s); pieces of at most this size bound the cost to
/// `O(text · MAX_PIECE)`.
pub const MAX_PIECE: usize = 1024;

/// The pieces the trainer learns from: the lines of `text`, and lines longer than
/// [`MAX_PIECE`] cut into pieces of at most that size. A cut goes before a whitespace that
/// follows a non-whitespace character, where the GPT-2 pre-tokenizer always starts a new
/// pre-token (its patterns take whitespace only at their start), so the pre-tokens, and the
/// tokenizer learned, are those of the uncut line. Only a run of more than `MAX_PIECE` bytes
/// without such a place (no whitespace) is cut inside, at a character boundary.
pub fn training_pieces(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n')
        .flat_map(|line| LinePieces { rest: line })
}

/// Splits one line as [`training_pieces`] describes.
struct LinePieces<'a> {
    rest: &'a str,
}

impl<'a> Iterator for LinePieces<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        if self.rest.len() <= MAX_PIECE {
            return Some(std::mem::take(&mut self.rest));
        }
        // The last whitespace after a non-whitespace character within the first MAX_PIECE
        // bytes, else the last character boundary there.
        let mut cut = None;
        let mut prev_white = true;
        for (i, ch) in self.rest.char_indices() {
            if i > MAX_PIECE {
                break;
            }
            let white = ch.is_whitespace();
            if white && !prev_white && i > 0 {
                cut = Some(i);
            }
            prev_white = white;
        }
        let cut = cut.unwrap_or_else(|| {
            let mut b = MAX_PIECE;
            while !self.rest.is_char_boundary(b) {
                b -= 1;
            }
            b
        });
        let (piece, rest) = self.rest.split_at(cut);
        self.rest = rest;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trains_to_size_and_round_trips() {
        let text = "the cat sat on the mat. the cat ate the rat.\nthat cat, that mat!\n".repeat(20);
        let t = train(&text, 280).unwrap();
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
        let again = HfTokenizer::from_json(&t.to_json().unwrap()).unwrap();
        assert_eq!(again.encode(&text).unwrap(), ids);
        assert!(train(&text, 100).is_err());
        assert!(HfTokenizer::from_json("{").is_err());
    }

    #[test]
    fn pieces_cut_long_lines_before_whitespace_and_cover_the_text() {
        let long_words = format!("{}\nshort line\n", "word ".repeat(1000));
        let pieces: Vec<&str> = training_pieces(&long_words).collect();
        assert_eq!(pieces.concat(), long_words);
        assert!(pieces.iter().all(|p| p.len() <= MAX_PIECE));
        // Every cut inside the long line falls before a space that follows a letter.
        for p in &pieces[1..pieces.len() - 1] {
            assert!(p.starts_with(' ') || p == &"short line\n", "{p:?}");
        }
        let no_space = "é".repeat(3000);
        let pieces: Vec<&str> = training_pieces(&no_space).collect();
        assert_eq!(pieces.concat(), no_space);
        assert!(pieces.iter().all(|p| p.len() <= MAX_PIECE && !p.is_empty()));
    }

    /// Cutting at whitespace changes nothing: the same merges as the uncut lines.
    #[test]
    fn cut_lines_learn_the_same_tokenizer() {
        let line: String = (0..600)
            .map(|i| ["the ", "cat  ", "sat, ", "on\tthe ", "mat. "][i % 5])
            .collect();
        let text = format!("{line}\n{line}\n");
        assert!(line.len() > 2 * MAX_PIECE);
        let cut = train(&text, 300).unwrap();
        let mut trainer = BpeTrainerBuilder::new()
            .vocab_size(300)
            .min_frequency(2)
            .show_progress(false)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build();
        let mut whole =
            TokenizerBuilder::<BPE, NormalizerWrapper, ByteLevel, ByteLevel, ByteLevel>::new()
                .with_model(BPE::default())
                .with_pre_tokenizer(Some(byte_level()))
                .with_post_processor(Some(byte_level()))
                .with_decoder(Some(byte_level()))
                .build()
                .unwrap();
        whole
            .train(&mut trainer, text.split_inclusive('\n'))
            .unwrap();
        let whole: tokenizers::Tokenizer = whole.into();
        assert_eq!(cut.vocab(), whole.get_vocab(true));
        assert_eq!(
            cut.encode(&text).unwrap(),
            whole.encode(text.as_str(), false).unwrap().get_ids()
        );
    }

    /// Whitespace-free text trains in bounded time, and a huge vocabulary request is the
    /// vocabulary the text can give.
    #[test]
    fn whitespace_free_text_and_a_huge_vocabulary() {
        let mut x = 1u32;
        let text: String = (0..200_000)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                char::from(b'a' + ((x >> 16) % 10) as u8)
            })
            .collect();
        let t = train(&text, 400).unwrap();
        assert_eq!(t.vocab_size(), 400);
        assert_eq!(t.decode(&t.encode(&text).unwrap()).unwrap(), text);
        let small = "abcabcabd\n".repeat(3);
        let huge = train(&small, usize::MAX).unwrap();
        assert!(huge.vocab_size() < 300, "{}", huge.vocab_size());
    }
}
