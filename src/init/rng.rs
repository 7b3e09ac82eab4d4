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

/// Fills `out` with independent standard normal draws, in order.
pub fn fill_standard_normal(rng: &mut Rng, out: &mut [f64]) {
    use rand::Rng as _;
    for v in out.iter_mut() {
        *v = rng.sample(rand_distr::StandardNormal);
    }
}
