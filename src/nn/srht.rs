//! The subsampled randomised Hadamard transform (SRHT) as a frozen `C x C` projection:
//! `y = W·x` with `W[o, i] = H[π(o), i]·s_i / √C`, where `s` are random signs, `H` the
//! (unnormalised) Hadamard matrix of order `C` ([`super::hadamard`], also for `C` not a power of
//! two) and `π` a random permutation of the outputs. `W` is orthogonal, so each head's block of
//! `D` outputs is a `C x D` projection with orthonormal columns, like a dense random orthogonal
//! `W_Q`, but it costs `C·(Σ factor orders)` additions per token instead of `2·C²` FLOPs.
//!
//! Forward: `u = s ⊙ x`, `v = H·u`, `y_o = v_{π(o)}/√C`. Backward to the input:
//! `g_{π(o)} = dy_o`, `dx = s ⊙ (Hᵀ·g)/√C`. No weight gradient: it is frozen.

use super::hadamard_rows::{FactorF32, LANES, apply_factors, factors_f32};
use crate::init::rng::seeded;
use rand::Rng as _;
use rayon::prelude::*;

/// One frozen SRHT projection of width `C`.
#[derive(Clone, Debug)]
pub struct Srht {
    c: usize,
    /// Kronecker factors; dense ones as f32 `m x m`, with their transposes.
    factors: Vec<FactorF32>,
    signs: Vec<f32>,
    perm: Vec<usize>,
}

impl Srht {
    /// The projection of width `c` drawn from `seed` (signs, then a Fisher-Yates permutation,
    /// from the project's seeded ChaCha8 stream); `None` when no Hadamard matrix of order `c`
    /// is known to [`super::hadamard::factors`].
    pub fn new(c: usize, seed: u64) -> Option<Self> {
        let factors = factors_f32(c)?;
        let mut rng = seeded(seed);
        let signs = (0..c)
            .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
            .collect();
        let mut perm: Vec<usize> = (0..c).collect();
        for i in (1..c).rev() {
            perm.swap(i, rng.random_range(0..=i));
        }
        Some(Srht {
            c,
            factors,
            signs,
            perm,
        })
    }

    /// Width `C`.
    pub fn width(&self) -> usize {
        self.c
    }

    /// The random signs `s` (`C` values, ±1), for other implementations of the transform
    /// (the Python package's PyTorch module); the factors are [`super::hadamard::factors`]`(C)`.
    pub fn signs(&self) -> &[f32] {
        &self.signs
    }

    /// The output permutation `π` (`y_o = v_{π(o)}/√C`).
    pub fn perm(&self) -> &[usize] {
        &self.perm
    }

    /// Additions and multiplications per transformed row (for the FLOP account).
    pub fn ops_per_row(&self) -> usize {
        let per: usize = self
            .factors
            .iter()
            .map(|f| match f {
                FactorF32::Sylvester(n) => n.trailing_zeros() as usize,
                FactorF32::Dense { m, .. } => 2 * m,
            })
            .sum();
        self.c * (per + 2)
    }

    /// `y = x·Wᵀ` for `rows` rows of width `C` (`y` overwritten).
    pub fn forward(&self, y: &mut [f32], x: &[f32]) {
        let c = self.c;
        let scale = 1.0 / (c as f32).sqrt();
        y.par_chunks_mut(LANES * c)
            .zip(x.par_chunks(LANES * c))
            .for_each(|(y, x)| {
                // The block transposed to `C x LANES`: the transform's innermost axis is then
                // the 16 rows, so every butterfly is one vector operation.
                let (mut t, mut tmp) = (vec![0.0f32; c * LANES], vec![0.0f32; c * LANES]);
                for (r, xr) in x.chunks_exact(c).enumerate() {
                    for (i, (&xv, &s)) in xr.iter().zip(&self.signs).enumerate() {
                        t[i * LANES + r] = xv * s;
                    }
                }
                // Row convention: `v = H·u` is `uᵀ·Hᵀ`, factor by factor transposed.
                apply_factors(&mut t, &mut tmp, &self.factors, true);
                for (r, yr) in y.chunks_exact_mut(c).enumerate() {
                    for (yv, &p) in yr.iter_mut().zip(&self.perm) {
                        *yv = t[p * LANES + r] * scale;
                    }
                }
            });
    }

    /// `dx (+)= dy·W`: the gradient with respect to the input of [`Srht::forward`].
    pub fn backward(&self, dx: &mut [f32], dy: &[f32], accumulate: bool) {
        let c = self.c;
        let scale = 1.0 / (c as f32).sqrt();
        dx.par_chunks_mut(LANES * c)
            .zip(dy.par_chunks(LANES * c))
            .for_each(|(dx, dy)| {
                let (mut g, mut tmp) = (vec![0.0f32; c * LANES], vec![0.0f32; c * LANES]);
                for (r, gr) in dy.chunks_exact(c).enumerate() {
                    for (&v, &p) in gr.iter().zip(&self.perm) {
                        g[p * LANES + r] = v;
                    }
                }
                // `Hᵀ·g` is `gᵀ·H`.
                apply_factors(&mut g, &mut tmp, &self.factors, false);
                for (r, dr) in dx.chunks_exact_mut(c).enumerate() {
                    for (i, (d, &s)) in dr.iter_mut().zip(&self.signs).enumerate() {
                        let val = g[i * LANES + r] * s * scale;
                        *d = if accumulate { *d + val } else { val };
                    }
                }
            });
    }

    /// The dense `C x C` matrix `W` (row-major, `out x in`, PyTorch's weight layout).
    pub fn dense(&self) -> Vec<f32> {
        let c = self.c;
        let mut eye = vec![0.0f32; c * c];
        for i in 0..c {
            eye[i * c + i] = 1.0;
        }
        // Row i of the result is W·e_i, the i-th column of W.
        let mut cols = vec![0.0f32; c * c];
        self.forward(&mut cols, &eye);
        (0..c * c).map(|k| cols[(k % c) * c + k / c]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_form_is_orthogonal_and_matches_the_transform() {
        for c in [1, 8, 12, 64, 96, 384] {
            let p = Srht::new(c, 7).expect("order has a Hadamard matrix");
            let w = p.dense();
            for i in 0..c {
                for j in 0..c {
                    let dot: f32 = (0..c).map(|k| w[i * c + k] * w[j * c + k]).sum();
                    let want = if i == j { 1.0 } else { 0.0 };
                    assert!((dot - want).abs() < 1e-5, "c={c} ({i},{j}): {dot}");
                }
            }
            let x: Vec<f32> = (0..3 * c).map(|i| ((i * 37 % 11) as f32) - 5.0).collect();
            let (mut y, mut back) = (vec![0.0; 3 * c], vec![0.0; 3 * c]);
            p.forward(&mut y, &x);
            p.backward(&mut back, &y, false);
            for r in 0..3 {
                for o in 0..c {
                    let want: f32 = (0..c).map(|i| w[o * c + i] * x[r * c + i]).sum();
                    assert!((y[r * c + o] - want).abs() < 1e-4, "c={c}");
                }
            }
            // W orthogonal: the backward of the forward is the input.
            for (a, b) in back.iter().zip(&x) {
                assert!((a - b).abs() < 1e-4, "c={c}: {a} vs {b}");
            }
        }
        assert!(Srht::new(10, 0).is_none());
    }

    #[test]
    fn draws_depend_on_the_seed_only() {
        let (a, b, c) = (Srht::new(64, 1), Srht::new(64, 1), Srht::new(64, 2));
        let (a, b, c) = (a.unwrap().dense(), b.unwrap().dense(), c.unwrap().dense());
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
