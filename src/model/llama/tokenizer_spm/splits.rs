//! The merges of a SentencePiece vocabulary: every split of a normal piece into two normal
//! pieces (as `transformers`' `SentencePieceExtractor` lists them), found in time linear in
//! the vocabulary's bytes.
//!
//! Looking each half up by its text hashes the whole piece once per split: `L²` per piece of
//! `L` bytes, which a file of one long piece turns into hours. Here every piece is hashed once
//! (a polynomial hash, so the hash of each prefix comes from the one before and the hash of
//! each suffix from the one after), and a half is looked up by its hash and length; its text
//! is compared only when the hash matches, and only when the merge is built.
//!
//! The merges themselves can be far larger than the file: the pieces `a`, `aa`, ..., `a`×n
//! (n²/2 bytes) make n²/2 merges whose texts take n³/3 bytes (5.5 MB of pieces, 12 GB of
//! merges). [`Splits::need`] counts them from the hashes alone, so the caller checks their
//! memory before building one.

use std::collections::HashMap;

/// Bytes one merge takes in memory beyond its text while the tokenizer is built: its entry
/// in the sort (32), its two JSON strings and array (about 150), and the `tokenizers` crate's
/// pair of strings and its merge map entry (about 100).
const MERGE_OVERHEAD: u64 = 288;

/// Copies of a merge's text alive at once: the JSON value, the document's text, and the
/// strings the `tokenizers` crate parses it into (one spare for its allocator).
const TEXT_COPIES: u64 = 4;

/// The multiplier of the polynomial hash (odd, so every power is invertible mod 2^64).
const BASE: u64 = 0x0000_0100_0000_01b3;

/// What a vocabulary's merges take, counted from hashes before any is built (an upper bound:
/// a hash that matches a different piece counts too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeNeed {
    /// Merges.
    pub merges: u64,
    /// Bytes of their text (the two halves of each: its piece's length).
    pub text_bytes: u64,
    /// Bytes hashed to count them: twice each normal piece's (linear in the vocabulary).
    pub hashed_bytes: u64,
}

impl MergeNeed {
    /// Bytes of memory building them takes (see [`MERGE_OVERHEAD`] and [`TEXT_COPIES`]),
    /// `None` beyond 64 bits or the address space.
    pub fn bytes(&self) -> Option<usize> {
        let n = self
            .merges
            .checked_mul(MERGE_OVERHEAD)?
            .checked_add(self.text_bytes.checked_mul(TEXT_COPIES)?)?;
        usize::try_from(n).ok()
    }
}

/// A hash and a length: how a piece is looked up.
type Key = (u64, usize);

/// The vocabulary, by hash.
pub struct Splits<'a> {
    tokens: &'a [String],
    types: &'a [u64],
    /// Every piece's key to its id (the last of equal pieces, as a map built in order keeps).
    by_key: HashMap<Key, usize>,
}

fn push(h: u64, byte: u8) -> u64 {
    h.wrapping_mul(BASE).wrapping_add(u64::from(byte) + 1)
}

fn key(s: &str) -> Key {
    (s.bytes().fold(0, push), s.len())
}

impl<'a> Splits<'a> {
    /// The pieces `tokens` with their `types` (missing: 1, normal).
    pub fn new(tokens: &'a [String], types: &'a [u64]) -> Self {
        let by_key = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (key(t), i))
            .collect();
        Splits {
            tokens,
            types,
            by_key,
        }
    }

    fn normal(&self, i: usize) -> bool {
        self.types.get(i).copied().unwrap_or(1) == 1
    }

    /// Whether `k` names a normal piece (by hash; a collision may say yes wrongly).
    fn normal_key(&self, k: &Key) -> bool {
        self.by_key.get(k).is_some_and(|&i| self.normal(i))
    }

    /// Calls `f(at, left, right)` for each split of `t` at a character boundary `at` whose
    /// halves' keys are both pieces' keys: `O(len)` with memory for the prefixes that are.
    fn candidates(&self, t: &str, mut f: impl FnMut(usize, Key, Key)) {
        let b = t.as_bytes();
        let mut prefixes: Vec<(usize, u64)> = Vec::new();
        let mut h = 0;
        for (j, &byte) in b.iter().enumerate().take(b.len().saturating_sub(1)) {
            h = push(h, byte);
            let at = j + 1;
            if t.is_char_boundary(at) && self.by_key.contains_key(&(h, at)) {
                prefixes.push((at, h));
            }
        }
        let (mut suffix, mut power, mut i) = (0u64, 1u64, b.len());
        while let Some((at, left)) = prefixes.pop() {
            while i > at {
                i -= 1;
                suffix = suffix.wrapping_add((u64::from(b[i]) + 1).wrapping_mul(power));
                power = power.wrapping_mul(BASE);
            }
            f(at, (left, at), (suffix, b.len() - at));
        }
    }

    /// The merges' count and size, from hashes alone (no text compared, nothing built).
    pub fn need(&self) -> MergeNeed {
        let mut n = MergeNeed {
            merges: 0,
            text_bytes: 0,
            hashed_bytes: 0,
        };
        for (i, t) in self.tokens.iter().enumerate() {
            if !self.normal(i) {
                continue;
            }
            n.hashed_bytes += 2 * t.len() as u64;
            self.candidates(t, |_, a, b| {
                if self.normal_key(&a) && self.normal_key(&b) {
                    n.merges += 1;
                    n.text_bytes += t.len() as u64;
                }
            });
        }
        n
    }

    /// The id of the piece `s` with key `k`: by hash, its text compared; on a collision by
    /// `ids` (every piece's id by text).
    fn id(&self, k: &Key, s: &str, ids: &HashMap<&str, usize>) -> Option<usize> {
        match self.by_key.get(k) {
            Some(&i) if self.tokens[i] == s => Some(i),
            Some(_) => ids.get(s).copied(),
            None => None,
        }
    }

    /// Calls `f(piece, left, right)` for every merge: a normal piece and the ids of the two
    /// normal pieces it splits into. `ids` is every piece's id by text (the last of equals).
    pub fn each(&self, ids: &HashMap<&str, usize>, mut f: impl FnMut(usize, usize, usize)) {
        for (i, t) in self.tokens.iter().enumerate() {
            if !self.normal(i) {
                continue;
            }
            self.candidates(t, |at, a, b| {
                let (left, right) = t.split_at(at);
                if let (Some(ia), Some(ib)) = (self.id(&a, left, ids), self.id(&b, right, ids))
                    && self.normal(ia)
                    && self.normal(ib)
                {
                    f(i, ia, ib);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The merges as `SentencePieceExtractor` lists them: every split looked up by text.
    fn by_text(tokens: &[String], types: &[u64]) -> Vec<(usize, usize, usize)> {
        let ids: HashMap<&str, usize> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i))
            .collect();
        let ty = |i: usize| types.get(i).copied().unwrap_or(1);
        let mut out = Vec::new();
        for (i, t) in tokens.iter().enumerate() {
            if ty(i) != 1 {
                continue;
            }
            for (at, _) in t.char_indices().skip(1) {
                let (a, b) = t.split_at(at);
                if let (Some(&ia), Some(&ib)) = (ids.get(a), ids.get(b))
                    && ty(ia) == 1
                    && ty(ib) == 1
                {
                    out.push((i, ia, ib));
                }
            }
        }
        out.sort();
        out
    }

    fn by_hash(tokens: &[String], types: &[u64]) -> Vec<(usize, usize, usize)> {
        let ids: HashMap<&str, usize> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i))
            .collect();
        let mut out = Vec::new();
        Splits::new(tokens, types).each(&ids, |i, a, b| out.push((i, a, b)));
        out.sort();
        out
    }

    #[test]
    fn the_same_merges_as_looking_each_half_up() {
        let toks: Vec<String> = [
            "▁", "t", "h", "e", "th", "he", "the", "▁the", "▁t", "é", "té", "<0x41>", "<s>", "ab",
            "a", "b", "ab", "aé", "éa", "aéa", "",
        ]
        .map(String::from)
        .to_vec();
        // `<s>` is a control piece, `<0x41>` a byte piece: neither merges nor is merged into.
        let mut types = vec![1u64; toks.len()];
        types[11] = 6;
        types[12] = 3;
        let want = by_text(&toks, &types);
        assert!(want.len() >= 8, "{want:?}");
        assert_eq!(by_hash(&toks, &types), want);
        let need = Splits::new(&toks, &types).need();
        assert_eq!(need.merges, want.len() as u64);
    }

    /// The case: the nested pieces `a` ... `a`×n. Their merges are counted, not built,
    /// and the count says what building them would take: n²/2 merges, n³/3 bytes of text.
    #[test]
    fn nested_pieces_are_counted_in_linear_work() {
        let n = 3000u64;
        let toks: Vec<String> = (1..=n).map(|k| "a".repeat(k as usize)).collect();
        let need = Splits::new(&toks, &[]).need();
        assert_eq!(need.merges, (1..=n).map(|k| k - 1).sum::<u64>());
        assert_eq!(need.text_bytes, (1..=n).map(|k| k * (k - 1)).sum::<u64>());
        assert_eq!(need.hashed_bytes, n * (n + 1));
        // 9 GB of merge text from 4.5 MB of pieces.
        assert!(need.bytes().unwrap() > 30 << 30);
    }

    /// 200,000 long pieces (64 bytes each) are counted by hashing each twice, and the merges
    /// found are the ones that exist: each long piece splits into its two 32-byte halves.
    #[test]
    fn a_large_vocabulary_is_hashed_once_per_piece() {
        let half = |i: usize, side: char| format!("{side}{i:031}");
        let mut toks: Vec<String> = Vec::new();
        for i in 0..100_000 {
            toks.push(half(i, 'l'));
            toks.push(half(i, 'r'));
        }
        for i in 0..200_000 {
            toks.push(format!("{}{}", half(i % 100_000, 'l'), half(i / 2, 'r')));
        }
        let total: u64 = toks.iter().map(|t| t.len() as u64).sum();
        let need = Splits::new(&toks, &[]).need();
        assert_eq!(need.merges, 200_000);
        assert_eq!(need.hashed_bytes, 2 * total);
        assert_eq!(need.text_bytes, 200_000 * 64);
    }

    #[test]
    fn one_long_piece_is_not_rehashed_per_split() {
        let toks = vec!["a".to_string(), "a".repeat(1 << 20)];
        let need = Splits::new(&toks, &[]).need();
        assert_eq!(need.merges, 0);
        assert_eq!(need.hashed_bytes, 2 * (1 + (1 << 20)));
    }
}
