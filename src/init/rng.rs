//! The project's seeded random number generator. Every random draw in Orthoformer goes
//! through [`seeded`], so the same seed gives the same bits on every machine and thread count.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The generator type used everywhere: ChaCha8, portable and reproducible.
pub type Rng = ChaCha8Rng;

/// A generator from a 64-bit seed.
pub fn seeded(seed: u64) -> Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Fills `out` with independent standard normal draws, in order: exactly the values (and the
/// generator's final state) of `rng.sample(rand_distr::StandardNormal)` per value, read in
/// blocks (see `init::gaussian`).
pub fn fill_standard_normal(rng: &mut Rng, out: &mut [f64]) {
    super::gaussian::fill_standard_normal(rng, out);
}

/// SplitMix64's finaliser (Steele, Lea and Flood 2014): a bijective 64-bit mix. The one seed
/// mixer of the crate: frozen heads' seeds, dropout masks and MQAR's data streams derive
/// independent-looking seeds from small integers with it.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
