//! Standard normal draws in bulk, bit for bit the values of `rng.sample(StandardNormal)` in a
//! loop, from the same stream positions, about three times faster.
//!
//! `rand_distr`'s sampler is a 256-layer ziggurat: one `u64` gives the layer (its low 8 bits)
//! and a uniform `u ∈ [−1, 1)` (its high 52 bits); `x = u · X[i]` is returned when
//! `|x| < X[i+1]`, about 98.8% of draws. Called once per value it pays the generator's
//! buffer bookkeeping and a function call each time. Here the generator's words are read in
//! blocks and that common case is tested inline; every other draw (the wedges and the tail,
//! which take further words) is handed to `rand_distr` itself, positioned on the same word, so
//! it computes exactly what it always did. At the end the generator is set to the word after
//! the last one used, as if each value had been drawn alone.
//!
//! The layer boundaries `X` are `rand_distr`'s own, read back once through its public sampler
//! (see [`layers`]), so they cannot drift from the library version linked.

use std::sync::OnceLock;

use rand::RngCore;
use rand::distr::Distribution;
use rand_distr::StandardNormal;

// `init::rng::Rng` is this type; named directly because the reading below needs ChaCha's
// word positions, and so that `rng` can wrap this file without a circle between the two.
use rand_chacha::ChaCha8Rng as Rng;

/// Words read from the generator at a time (2 KiB).
const BLOCK_WORDS: usize = 512;

/// `rand_distr`'s ziggurat boundaries `X[0..=256]` (`X[256] = 0`), or `None` if they could not
/// be read back (then every draw goes through `rand_distr`; never expected).
fn layers() -> Option<&'static [f64; 257]> {
    static TABLE: OnceLock<Option<[f64; 257]>> = OnceLock::new();
    TABLE.get_or_init(read_layers).as_ref()
}

/// Reads `X[i]` by handing the sampler a `u64` whose layer is `i` and whose uniform is
/// `u = 2⁻¹⁰` exactly, so that it returns `u · X[i]` (a power-of-two scaling, exact). Layers
/// below 255 return it inline (`u · X[i] < X[i+1]`) from that one word; the last layer
/// (`X[256] = 0`) never does, and returns it from its wedge when the next word is all ones
/// (`f₂₅₆ + (f₂₅₅ − f₂₅₆)·(1 − 2⁻⁵³) < pdf(X[255]/1024)`). A draw that takes other words than
/// these means the sampler is not the ziggurat read here: `None`.
fn read_layers() -> Option<[f64; 257]> {
    // (bits >> 12) is the mantissa of a value in [2, 4): 3 + 2⁻¹⁰ = 2 · (1 + 2⁻¹ + 2⁻¹¹).
    let mantissa: u64 = (1 << 51) | (1 << 41);
    let mut x = [0.0f64; 257];
    for (i, slot) in x.iter_mut().take(256).enumerate() {
        let mut words = Scripted {
            words: [(mantissa << 12) | i as u64, u64::MAX],
            next: 0,
            overrun: false,
        };
        let v: f64 = StandardNormal.sample(&mut words);
        let expected = if i == 255 { 2 } else { 1 };
        // `v` must be a positive number (NaN fails too).
        if words.overrun
            || words.next != expected
            || v.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
        {
            return None;
        }
        *slot = v * 1024.0;
    }
    // The layers narrow towards the mode: a table that does not is not the ziggurat.
    x.windows(2).all(|w| w[0] > w[1]).then_some(x)
}

/// A generator that yields the given words, then reports an overrun.
struct Scripted {
    words: [u64; 2],
    next: usize,
    overrun: bool,
}

impl RngCore for Scripted {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        match self.words.get(self.next) {
            Some(&w) => {
                self.next += 1;
                w
            }
            None => {
                self.overrun = true;
                // Ends any rejection loop at once (u = 0.5 in layer 0 is accepted inline).
                3 << 62
            }
        }
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// The generator's words from a starting position, read `BLOCK_WORDS` at a time. As a
/// generator it gives `rand_distr` the words in the order the generator itself would.
struct Words<'a> {
    rng: &'a mut Rng,
    buf: [u32; BLOCK_WORDS],
    /// Next unread word of `buf`.
    pos: usize,
    /// Words consumed so far (read by the caller, not merely buffered).
    used: u128,
}

impl<'a> Words<'a> {
    fn new(rng: &'a mut Rng) -> Self {
        Words {
            rng,
            buf: [0; BLOCK_WORDS],
            pos: BLOCK_WORDS,
            used: 0,
        }
    }

    /// Makes at least two unread words available (keeps an odd leftover word in front).
    #[inline]
    fn ensure_two(&mut self) {
        if self.pos + 2 > BLOCK_WORDS {
            let left = BLOCK_WORDS - self.pos;
            self.buf.copy_within(self.pos.., 0);
            let mut bytes = [0u8; BLOCK_WORDS * 4];
            let want = (BLOCK_WORDS - left) * 4;
            self.rng.fill_bytes(&mut bytes[..want]);
            for (w, b) in self.buf[left..].iter_mut().zip(bytes.chunks_exact(4)) {
                *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            self.pos = 0;
        }
    }
}

impl RngCore for Words<'_> {
    fn next_u32(&mut self) -> u32 {
        if self.pos >= BLOCK_WORDS {
            self.ensure_two();
        }
        let w = self.buf[self.pos];
        self.pos += 1;
        self.used += 1;
        w
    }
    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.ensure_two();
        let v = u64::from(self.buf[self.pos]) | (u64::from(self.buf[self.pos + 1]) << 32);
        self.pos += 2;
        self.used += 2;
        v
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        // Whole words, as the block generator fills bytes (a partial word's rest is dropped).
        for chunk in dst.chunks_mut(4) {
            let v = self.next_u32().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Fills `out` with standard normal draws: exactly `rng.sample(StandardNormal)` for each value
/// in turn, leaving `rng` where those calls would.
pub fn fill_standard_normal(rng: &mut Rng, out: &mut [f64]) {
    let Some(x) = layers() else {
        for v in out.iter_mut() {
            *v = StandardNormal.sample(rng);
        }
        return;
    };
    let start = rng.get_word_pos();
    let mut words = Words::new(rng);
    let mut k = 0;
    while k < out.len() {
        words.ensure_two();
        // The inline case over the words buffered, without bookkeeping per value.
        let mut pos = words.pos;
        while pos + 2 <= BLOCK_WORDS && k < out.len() {
            let bits = u64::from(words.buf[pos]) | (u64::from(words.buf[pos + 1]) << 32);
            let i = (bits & 0xff) as usize;
            // rand's `into_float_with_exponent(1)`: a value in [2, 4), minus 3.
            let u = f64::from_bits((bits >> 12) | (1024u64 << 52)) - 3.0;
            let v = u * x[i];
            if v.abs() < x[i + 1] {
                out[k] = v;
                k += 1;
                pos += 2;
            } else {
                break;
            }
        }
        words.used += (pos - words.pos) as u128;
        words.pos = pos;
        if k < out.len() && pos + 2 <= BLOCK_WORDS {
            // A wedge or the tail: rand_distr's own code from this very word on.
            out[k] = StandardNormal.sample(&mut words);
            k += 1;
        }
    }
    let used = words.used;
    rng.set_word_pos(start + used);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::rng::seeded;
    use rand::Rng as _;

    /// The reference: one `rand_distr` call per value.
    fn reference(rng: &mut Rng, n: usize) -> Vec<f64> {
        (0..n).map(|_| rng.sample(StandardNormal)).collect()
    }

    #[test]
    fn the_layers_are_read_back() {
        let x = layers().expect("the ziggurat's layers");
        assert_eq!(x[1], 3.654_152_885_361_009, "X[1] is the tail's start R");
        assert_eq!(x[256], 0.0);
    }

    #[test]
    fn same_bits_and_same_stream_position_as_one_call_per_value() {
        for (seed, n) in [
            (0u64, 1usize),
            (1, 7),
            (2, 255),
            (3, 256),
            (4, 257),
            (5, 10_000),
        ] {
            let (mut a, mut b) = (seeded(seed), seeded(seed));
            // Start some runs on an odd word, as after a 32-bit draw.
            if seed % 2 == 1 {
                let _: u32 = a.random();
                let _: u32 = b.random();
            }
            let want = reference(&mut a, n);
            let mut got = vec![0.0; n];
            fill_standard_normal(&mut b, &mut got);
            assert!(
                want.iter()
                    .zip(&got)
                    .all(|(p, q)| p.to_bits() == q.to_bits())
            );
            assert_eq!(a.get_word_pos(), b.get_word_pos(), "seed {seed} n {n}");
            // And the generator goes on identically.
            assert_eq!(a.random::<u64>(), b.random::<u64>());
        }
    }

    #[test]
    fn many_draws_cross_every_path() {
        // 200k draws visit the tail (layer 0) and the wedges many times.
        let (mut a, mut b) = (seeded(99), seeded(99));
        let want = reference(&mut a, 200_000);
        let mut got = vec![0.0; 200_000];
        fill_standard_normal(&mut b, &mut got);
        assert!(
            want.iter()
                .zip(&got)
                .all(|(p, q)| p.to_bits() == q.to_bits())
        );
        assert_eq!(a.get_word_pos(), b.get_word_pos());
        assert!(
            want.iter().any(|v| v.abs() > 3.654_152_885_361_009),
            "the tail was drawn"
        );
    }
}
