//! Hadamard transforms of f32 rows: the Kronecker factors of [`super::hadamard`] in f32 and
//! their application to blocks of rows, shared by the frozen SRHT projection
//! ([`super::srht`]) and the engine's online transforms ([`OnlineHadamard`]: QuaRot's `R3` on
//! each query/key head after RoPE, `R4` on the input of `down_proj`).
//!
//! A block of rows is transposed to `n x rows`, so every factor works on contiguous runs of
//! `rows` values (the innermost axis) and each butterfly is a vector operation.

use rayon::prelude::*;

use super::hadamard::{Factor, dense_factor, factors, unavailable};
use super::simd::dispatch;

/// A Kronecker factor in f32; dense ones with their transposes.
#[derive(Clone, Debug)]
pub(crate) enum FactorF32 {
    Sylvester(usize),
    Dense { m: usize, f: Vec<f32>, ft: Vec<f32> },
}

/// The f32 factors of the Hadamard matrix of order `n` ([`factors`]), if there is one.
pub(crate) fn factors_f32(n: usize) -> Option<Vec<FactorF32>> {
    let fs = factors(n)?;
    Some(
        fs.iter()
            .map(|f| match f {
                Factor::Sylvester(n) => FactorF32::Sylvester(*n),
                Factor::Dense(m, _) => {
                    let d = dense_factor(f);
                    let f: Vec<f32> = d.iter().map(|&x| x as f32).collect();
                    let ft = (0..m * m).map(|k| f[(k % m) * m + k / m]).collect();
                    FactorF32::Dense { m: *m, f, ft }
                }
            })
            .collect(),
    )
}

/// Rows transformed together (one vector lane each).
pub(crate) const LANES: usize = 16;

dispatch! {
    /// `x ← x·(F₁' ⊗ … ⊗ F_k' ⊗ I)`: `x` read as `n` blocks of interleaved row vectors (the
    /// innermost axis), `F'` each factor or, with `transpose`, its transpose.
    pub(crate) fn apply_factors(x: &mut [f32], scratch: &mut [f32], factors: &[FactorF32], transpose: bool) {
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
                    let scratch = &mut scratch[..n];
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

/// `x ← x·D·H/√n` on every `n`-wide row of a buffer, with `H` the Hadamard matrix of order
/// `n` ([`factors`]) and `D` a ±1 diagonal (all ones unless signs are given): an orthogonal map
/// the engine applies at run time, its inverse folded into the weights that read the rows.
#[derive(Clone, Debug)]
pub struct OnlineHadamard {
    n: usize,
    factors: Vec<FactorF32>,
    signs: Option<Vec<f32>>,
}

impl OnlineHadamard {
    /// The transform of order `n` with signs `signs` (`None`: all +1), or the one-line reason
    /// there is none (no Hadamard matrix of that order is built here, or signs that are not
    /// `n` values of ±1).
    pub fn new(n: usize, signs: Option<Vec<f32>>) -> Result<Self, String> {
        let factors = factors_f32(n).ok_or_else(|| unavailable(n))?;
        if let Some(s) = &signs
            && (s.len() != n || s.iter().any(|&x| x != 1.0 && x != -1.0))
        {
            return Err(format!(
                "the signs of an online Hadamard transform of order {n} must be {n} values of +1 \
                 or -1 ({} given)",
                s.len()
            ));
        }
        Ok(OnlineHadamard { n, factors, signs })
    }

    /// The order `n`.
    pub fn order(&self) -> usize {
        self.n
    }

    /// The ±1 diagonal, when not all ones.
    pub fn signs(&self) -> Option<&[f32]> {
        self.signs.as_deref()
    }

    /// Transforms every `n`-wide row of `x` (`x.len()` a multiple of `n`). Up to 16 rows
    /// run on this thread in `scratch` (grown once, so a decode step allocates nothing after
    /// its first); more run in parallel blocks, each with its own buffers.
    pub fn apply(&self, x: &mut [f32], scratch: &mut Vec<f32>) {
        let n = self.n;
        assert!(
            x.len().is_multiple_of(n),
            "online Hadamard of order {n}: {} values",
            x.len()
        );
        if x.len() <= LANES * n {
            if scratch.len() < 2 * x.len() {
                scratch.resize(2 * x.len(), 0.0);
            }
            let (t, tmp) = scratch.split_at_mut(x.len());
            self.block(x, t, tmp);
        } else {
            x.par_chunks_mut(LANES * n).for_each(|b| {
                let mut s = vec![0.0f32; 2 * b.len()];
                let (t, tmp) = s.split_at_mut(b.len());
                self.block(b, t, tmp);
            });
        }
    }

    /// One block of rows through buffers `t`, `tmp` (at least `x.len()` each).
    fn block(&self, x: &mut [f32], t: &mut [f32], tmp: &mut [f32]) {
        let n = self.n;
        let rows = x.len() / n;
        let t = &mut t[..x.len()];
        let scale = 1.0 / (n as f32).sqrt();
        for (r, row) in x.chunks_exact(n).enumerate() {
            match &self.signs {
                Some(s) => row
                    .iter()
                    .zip(s)
                    .enumerate()
                    .for_each(|(i, (&v, &s))| t[i * rows + r] = v * s),
                None => row
                    .iter()
                    .enumerate()
                    .for_each(|(i, &v)| t[i * rows + r] = v),
            }
        }
        apply_factors(t, tmp, &self.factors, false);
        for (r, row) in x.chunks_exact_mut(n).enumerate() {
            for (i, v) in row.iter_mut().enumerate() {
                *v = t[i * rows + r] * scale;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x·D·H/√n` in f64 from the dense factors.
    fn reference(x: &[f32], n: usize, signs: Option<&[f32]>) -> Vec<f64> {
        let mut h = vec![1.0];
        let mut m = 1;
        for f in factors(n).unwrap() {
            h = super::super::hadamard::kron(&h, m, &dense_factor(&f), f.order());
            m *= f.order();
        }
        x.chunks_exact(n)
            .flat_map(|row| {
                let h = &h;
                (0..n).map(move |j| {
                    (0..n)
                        .map(|i| {
                            let s = signs.map_or(1.0, |s| f64::from(s[i]));
                            f64::from(row[i]) * s * h[i * n + j]
                        })
                        .sum::<f64>()
                        / (n as f64).sqrt()
                })
            })
            .collect()
    }

    #[test]
    fn equals_the_dense_product_and_preserves_norms() {
        let mut scratch = Vec::new();
        for (n, rows) in [(4, 1), (64, 3), (48, 17), (172, 2), (1536, 1), (28, 40)] {
            let x: Vec<f32> = (0..n * rows)
                .map(|i| ((i * 7919 % 103) as f32 - 51.0) / 17.0)
                .collect();
            let signs: Vec<f32> = (0..n)
                .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 })
                .collect();
            for s in [None, Some(signs)] {
                let h = OnlineHadamard::new(n, s.clone()).unwrap();
                let mut y = x.clone();
                h.apply(&mut y, &mut scratch);
                let want = reference(&x, n, s.as_deref());
                for (g, w) in y.iter().zip(&want) {
                    assert!((f64::from(*g) - w).abs() < 1e-4, "n={n}: {g} vs {w}");
                }
                let norm = |v: &[f32]| v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
                assert!((norm(&y) / norm(&x) - 1.0).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn orders_without_a_matrix_and_bad_signs_are_refused() {
        let e = OnlineHadamard::new(10, None).unwrap_err();
        assert!(e.contains("order 10") && e.contains("172"), "{e}");
        assert!(OnlineHadamard::new(4, Some(vec![1.0, -1.0, 0.5, 1.0])).is_err());
        assert!(OnlineHadamard::new(4, Some(vec![1.0; 3])).is_err());
    }
}
