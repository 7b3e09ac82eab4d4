//! NumPy's `numpy.random.default_rng(entropy).integers(0, high, size=n, dtype=np.int64)`,
//! bit for bit: the PyTorch trainer draws a token folder's batch windows with it
//! (`orthoformer.tokens.TokenSampler`: batch `k` of stream `s` is
//! `default_rng([seed, s, k])`), so the Rust trainer draws the same windows from the same
//! folder, and either engine continues the other's checkpoint on the same batches.
//!
//! Three pieces, ported from NumPy 1.17+ (`numpy/random/bit_generator.pyx`,
//! `numpy/random/src/pcg64/pcg64.h`, `numpy/random/src/distributions/distributions.c`):
//! - `SeedSequence(entropy)`: each integer becomes its little-endian 32-bit words (0 is one
//!   word), the words are hashed into a pool of four (`mix_entropy`), and `generate_state(4,
//!   uint64)` hashes the pool into four 64-bit words;
//! - `PCG64` (128-bit LCG, XSL-RR output) seeded with state `(w0 << 64) + w1` and increment
//!   `(w2 << 64) + w3`; a 32-bit draw is the low half of a 64-bit output, the next one its
//!   high half;
//! - bounded integers by Lemire's method: ranges below 2^32 draw 32-bit words, larger ones
//!   64-bit words (`random_bounded_uint64_fill` without masking).

/// `SeedSequence` hashing constants.
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL: usize = 4;
/// PCG64's LCG multiplier.
const PCG_MULT: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;

/// A `numpy.random.Generator(PCG64(SeedSequence(entropy)))`.
#[derive(Debug, Clone)]
pub struct NumpyRng {
    state: u128,
    inc: u128,
    /// The high half of the last 64-bit output, when a 32-bit draw left it.
    half: Option<u32>,
}

impl NumpyRng {
    /// `numpy.random.default_rng([e0, e1, ...])` for non-negative integers `entropy`.
    pub fn new(entropy: &[u128]) -> Self {
        let words: Vec<u32> = entropy.iter().flat_map(|&n| words_of(n)).collect();
        let pool = mix_entropy(&words);
        let s = generate_state(&pool);
        let mut rng = NumpyRng {
            state: 0,
            inc: ((u128::from(s[2]) << 64 | u128::from(s[3])) << 1) | 1,
            half: None,
        };
        rng.step();
        rng.state = rng
            .state
            .wrapping_add(u128::from(s[0]) << 64 | u128::from(s[1]));
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    /// The next 64-bit output (`pcg64_next64`).
    pub fn next_u64(&mut self) -> u64 {
        self.step();
        let s = self.state;
        let rot = (s >> 122) as u32;
        (((s >> 64) as u64) ^ (s as u64)).rotate_right(rot)
    }

    /// The next 32-bit output (`pcg64_next32`): halves of one 64-bit output, low first.
    pub fn next_u32(&mut self) -> u32 {
        if let Some(h) = self.half.take() {
            return h;
        }
        let next = self.next_u64();
        self.half = Some((next >> 32) as u32);
        next as u32
    }

    /// `integers(0, high, size=n, dtype=np.int64)`: `n` draws uniform in `0..high`
    /// (`high` at least 1).
    pub fn integers(&mut self, high: u64, n: usize) -> Vec<u64> {
        let rng = high.saturating_sub(1);
        (0..n).map(|_| self.bounded(rng)).collect()
    }

    /// One draw in `0..=rng`, as `random_bounded_uint64_fill` draws it.
    fn bounded(&mut self, rng: u64) -> u64 {
        if rng == 0 {
            0
        } else if rng < u64::from(u32::MAX) {
            u64::from(self.lemire32(rng as u32))
        } else if rng == u64::from(u32::MAX) {
            u64::from(self.next_u32())
        } else if rng == u64::MAX {
            self.next_u64()
        } else {
            self.lemire64(rng)
        }
    }

    /// `buffered_bounded_lemire_uint32`.
    fn lemire32(&mut self, rng: u32) -> u32 {
        let excl = rng + 1;
        let mut m = u64::from(self.next_u32()) * u64::from(excl);
        let mut left = m as u32;
        if left < excl {
            let threshold = (u32::MAX - rng) % excl;
            while left < threshold {
                m = u64::from(self.next_u32()) * u64::from(excl);
                left = m as u32;
            }
        }
        (m >> 32) as u32
    }

    /// `bounded_lemire_uint64`.
    fn lemire64(&mut self, rng: u64) -> u64 {
        let excl = rng + 1;
        let mut m = u128::from(self.next_u64()) * u128::from(excl);
        let mut left = m as u64;
        if left < excl {
            let threshold = (u64::MAX - rng) % excl;
            while left < threshold {
                m = u128::from(self.next_u64()) * u128::from(excl);
                left = m as u64;
            }
        }
        (m >> 64) as u64
    }
}

/// `_int_to_uint32_array`: little-endian 32-bit words, `[0]` for zero.
fn words_of(mut n: u128) -> Vec<u32> {
    let mut w = vec![n as u32];
    n >>= 32;
    while n > 0 {
        w.push(n as u32);
        n >>= 32;
    }
    w
}

/// `SeedSequence.mix_entropy` into a pool of [`POOL`] words.
fn mix_entropy(entropy: &[u32]) -> [u32; POOL] {
    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let mut v = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        v = v.wrapping_mul(hash_const);
        v ^ (v >> XSHIFT)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L
            .wrapping_mul(x)
            .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> XSHIFT)
    };
    let mut pool = [0u32; POOL];
    for (i, p) in pool.iter_mut().enumerate() {
        *p = hashmix(entropy.get(i).copied().unwrap_or(0));
    }
    for src in 0..POOL {
        for dst in 0..POOL {
            if src != dst {
                pool[dst] = mix(pool[dst], hashmix(pool[src]));
            }
        }
    }
    for &e in entropy.iter().skip(POOL) {
        for p in pool.iter_mut() {
            *p = mix(*p, hashmix(e));
        }
    }
    pool
}

/// `SeedSequence.generate_state(4, np.uint64)`.
fn generate_state(pool: &[u32; POOL]) -> [u64; 4] {
    let mut hash_const = INIT_B;
    let mut words = [0u32; 8];
    for (i, w) in words.iter_mut().enumerate() {
        let mut v = pool[i % POOL] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash_const);
        *w = v ^ (v >> XSHIFT);
    }
    std::array::from_fn(|j| u64::from(words[2 * j]) | u64::from(words[2 * j + 1]) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values printed by NumPy 2.4.6 (/work/venv):
    //   import numpy as np
    //   r = np.random.default_rng([0, 0, 0]); r.bit_generator.random_raw(2)
    //   np.random.default_rng([7, 0x5EEDE7A1, 3]).integers(0, 1000, size=6, dtype=np.int64)
    //   np.random.default_rng([2**40 + 5, 1, 0]).integers(0, 2**40, size=3, dtype=np.int64)
    //   np.random.default_rng([1, 2, 3, 4, 5, 6]).integers(0, 2**32 - 1, size=3, dtype=np.int64)
    #[test]
    fn matches_numpy() {
        let mut r = NumpyRng::new(&[0, 0, 0]);
        assert_eq!([r.next_u64(), r.next_u64()], RAW_000);
        let got = NumpyRng::new(&[7, 0x5EED_E7A1, 3]).integers(1000, 6);
        assert_eq!(got, SMALL);
        let got = NumpyRng::new(&[(1 << 40) + 5, 1, 0]).integers(1 << 40, 3);
        assert_eq!(got, LARGE);
        let got = NumpyRng::new(&[1, 2, 3, 4, 5, 6]).integers((1 << 32) - 1, 3);
        assert_eq!(got, LONG_ENTROPY);
    }

    #[test]
    fn one_value_range_draws_nothing() {
        let mut r = NumpyRng::new(&[1]);
        assert_eq!(r.integers(1, 4), vec![0; 4]);
    }

    const RAW_000: [u64; 2] = [11749869230777074271, 4976686463289251617];
    const SMALL: [u64; 6] = [42, 972, 95, 299, 141, 683];
    const LARGE: [u64; 3] = [450176263522, 643708072521, 144045106607];
    const LONG_ENTROPY: [u64; 3] = [1848005265, 2670631802, 3068873248];
}
