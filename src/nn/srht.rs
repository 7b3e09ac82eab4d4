//! The subsampled randomised Hadamard transform (SRHT) as a frozen `C x C` projection:
//! `y = W·x` with `W[o, i] = H[π(o), i]·s_i / √C`, where `s` are random signs, `H` the
//! (unnormalised) Hadamard matrix of order `C` ([`super::hadamard`], also for `C` not a power of
//! two) and `π` a random permutation of the outputs. `W` is orthogonal, so each head's block of
//! `D` outputs is a `C x D` projection with orthonormal columns, like a dense random orthogonal
//! `W_Q`, but it costs `C·(Σ factor orders)` additions per token instead of `2·C²` FLOPs.
//!
//! Forward: `u = s ⊙ x`, `v = H·u`, `y_o = v_{π(o)}/√C`. Backward to the input:
//! `g_{π(o)} = dy_o`, `dx = s ⊙ (Hᵀ·g)/√C`. No weight gradient: it is frozen.

use super::hadamard::{Factor, dense_factor, factors};
use super::simd::dispatch;
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

#[derive(Clone, Debug)]
enum FactorF32 {
    Sylvester(usize),
    Dense { m: usize, f: Vec<f32>, ft: Vec<f32> },
}

/// Rows transformed together (one vector lane each).
const LANES: usize = 16;

impl Srht {
    /// The projection of width `c` drawn from `seed` (signs, then a Fisher-Yates permutation,
    /// from the project's seeded ChaCha8 stream); `None` when no Hadamard matrix of order `c`
    /// is known to [`factors`].
    pub fn new(c: usize, seed: u64) -> Option<Self> {
        let fs = factors(c)?;
        let factors = fs
            .iter()
            .map(|f| match f {
                Factor::Sylvester(n) => FactorF32::Sylvester(*n),
                Factor::Dense(m, _) => {
                    let d = dense_factor(f);
                    let f: Vec<f32> = d.iter().map(|&x| x as f32).collect();
                    let ft = (0..m * m).map(|k| f[(k % m) * m + k / m]).collect();
                    FactorF32::Dense { m: *m, f, ft }
                }
            })
            .collect();
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
    /// (the Python package's PyTorch module); the factors are [`factors`]`(C)`.
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

dispatch! {
    /// `x ← x·(F₁' ⊗ … ⊗ F_k' ⊗ I)`: `x` read as `C` blocks of interleaved row vectors (the
    /// innermost axis), `F'` each factor or, with `transpose`, its transpose.
    fn apply_factors(x: &mut [f32], scratch: &mut [f32], factors: &[FactorF32], transpose: bool) {
        let n = x.len();
        let mut inner = n;
        for f in factors {
            match f {
                FactorF32::Sylvester(m) => {
                    let m = *m;
                    inner /= m;
                    // Symmetric: the transpose is itself.
                    let mut h = 1;
                    while h < m {
                        for o in (0..n).step_by(m * inner) {
                            for blk in (0..m).step_by(2 * h) {
                                for k in blk..blk + h {
                                    let (a, b) = (o + k * inner, o + (k + h) * inner);
                                    let (lo, hi) = x.split_at_mut(b);
                                    for (p, q) in lo[a..a + inner].iter_mut().zip(&mut hi[..inner]) {
                                        let (u, v) = (*p, *q);
                                        *p = u + v;
                                        *q = u - v;
                                    }
                                }
                            }
                        }
                        h *= 2;
                    }
                }
                FactorF32::Dense { m, f, ft } => {
                    let m = *m;
                    inner /= m;
                    let fm = if transpose { ft } else { f };
                    scratch.fill(0.0);
                    // View x as (outer, m, inner): y[o, j, i] = Σ_k x[o, k, i]·F[k, j].
                    for o in (0..n).step_by(m * inner) {
                        for k in 0..m {
                            let src = &x[o + k * inner..o + (k + 1) * inner];
                            for j in 0..m {
                                let cf = fm[k * m + j];
                                let dst = &mut scratch[o + j * inner..o + (j + 1) * inner];
                                for (d, s) in dst.iter_mut().zip(src) {
                                    *d += cf * s;
                                }
                            }
                        }
                    }
                    x.copy_from_slice(scratch);
                }
            }
        }
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
