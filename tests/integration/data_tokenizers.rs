//! Both tokenizers round-trip real text: TinyShakespeare (character level, and byte-level BPE
//! trained on part of it), and unseen text with characters outside the training set for BPE.
//! The split and the batches are deterministic.

use orthoformer::data::corpus::TINY_SHAKESPEARE;
use orthoformer::data::{BatchSampler, Split, Tokenizer, TokenizerKind};

#[test]
fn char_tokenizer_round_trips_tiny_shakespeare() {
    let t = Tokenizer::train(TokenizerKind::Char, TINY_SHAKESPEARE, 0).unwrap();
    assert_eq!(t.vocab_size(), 65);
    let ids = t.encode(TINY_SHAKESPEARE).unwrap();
    assert_eq!(ids.len(), TINY_SHAKESPEARE.chars().count());
    assert_eq!(t.decode(&ids).unwrap(), TINY_SHAKESPEARE);
    let err = t.encode("naïve").unwrap_err().to_string();
    assert!(err.contains("not in the tokenizer"), "{err}");
}

#[test]
fn bpe_round_trips_and_saves() {
    let text = &TINY_SHAKESPEARE[..200_000];
    let t = Tokenizer::train(TokenizerKind::Bpe, text, 512).unwrap();
    assert_eq!(t.vocab_size(), 512);
    let ids = t.encode(text).unwrap();
    assert!(
        ids.len() * 10 < text.len() * 6,
        "merges should compress: {}",
        ids.len()
    );
    assert_eq!(t.decode(&ids).unwrap(), text);
    let unseen = "Ωμέγα — 日本語 — emoji 🎭\r\n\ttabs";
    assert_eq!(t.decode(&t.encode(unseen).unwrap()).unwrap(), unseen);
    let Tokenizer::Bpe(b) = &t else { panic!() };
    let json = b.to_json().unwrap();
    assert!(json.contains("\"ByteLevel\""), "a standard tokenizer.json");
    let again = orthoformer::data::hf::HfTokenizer::from_json(&json).unwrap();
    assert_eq!(again.encode(text).unwrap(), ids);
    // Training is deterministic: the same text gives the same merges.
    let twice = Tokenizer::train(TokenizerKind::Bpe, text, 512).unwrap();
    assert_eq!(twice.encode(text).unwrap(), ids);
}

#[test]
fn split_and_batches_are_deterministic() {
    let t = Tokenizer::train(TokenizerKind::Char, TINY_SHAKESPEARE, 0).unwrap();
    let ids = t.encode(TINY_SHAKESPEARE).unwrap();
    let s = Split::new(&ids, 256).unwrap();
    assert_eq!(s.train.len(), 1_003_854);
    assert_eq!(s.val.len(), 111_540);
    let a = BatchSampler::new(5).next_batch(&s.train, 4, 64);
    let b = BatchSampler::new(5).next_batch(&s.train, 4, 64);
    assert_eq!(a, b);
}
