//! The orthogonal matrix `Q` (`C x C`) that rotates the residual stream, and its application
//! to blocks of row vectors in f64.
//!
//! - `Random`: Haar-distributed, dense; applied by an f64 GEMM.
//! - `Hadamard`: `Q = D·H/√C` with `D` random ±1 signs and `H` a Hadamard matrix
//!   (see [`super::hadamard`]); applied by the fast transform, never formed.

use rand::Rng as _;
use rayon::prelude::*;

use super::RotateError;
use super::hadamard::{Factor, apply_row, factors, unavailable};

/// Which orthogonal matrix rotates the residual stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RotationKind {
    /// Haar-random dense orthogonal matrix.
    Random,
    /// Random signs times a normalised Hadamard matrix, applied by a fast transform.
    Hadamard,
}

impl RotationKind {
    /// Every kind, as [`RotationKind::name`] spells it.
    pub const NAMES: [&'static str; 2] = ["random", "hadamard"];

    /// The kind's name (`random`, `hadamard`), as the command line and Python spell it.
    pub fn name(self) -> &'static str {
        match self {
            RotationKind::Random => "random",
            RotationKind::Hadamard => "hadamard",
        }
    }
}

impl std::fmt::Display for RotationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RotationKind {
    type Err = crate::Error;

    /// `random` or `hadamard`; anything else names the `rotation` field.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "random" => Ok(RotationKind::Random),
            "hadamard" => Ok(RotationKind::Hadamard),
            other => Err(crate::Error::Rotate(RotateError::Invalid(format!(
                "`rotation` {other:?}: use hadamard or random"
            )))),
        }
    }
}

/// An orthogonal `C x C` matrix.
#[derive(Debug, Clone)]
pub enum Rotation {
    /// A dense row-major matrix.
    Dense {
        /// Its order `C`.
        n: usize,
        /// `C x C`, row-major.
        q: Vec<f64>,
    },
    /// A randomised Hadamard matrix `diag(signs)·H/√C`.
    Hadamard {
        /// The ±1 diagonal.
        signs: Vec<f64>,
        /// Kronecker factors of `H`.
        factors: Vec<Factor>,
    },
}

impl Rotation {
    /// A Haar-random rotation of order `n` from `seed`.
    pub fn random(n: usize, seed: u64) -> Result<Self, RotateError> {
        let q = crate::init::orthogonal::haar_f64(n, n, 1.0, seed)
            .map_err(|e| RotateError::Invalid(format!("random rotation: {e}")))?;
        Ok(Rotation::Dense { n, q })
    }

    /// The rotation of `kind` and order `n` drawn from `seed`.
    pub fn of_kind(kind: RotationKind, n: usize, seed: u64) -> Result<Self, RotateError> {
        match kind {
            RotationKind::Random => Rotation::random(n, seed),
            RotationKind::Hadamard => Rotation::hadamard(n, seed),
        }
    }

    /// A randomised Hadamard rotation of order `n` (signs from `seed`).
    pub fn hadamard(n: usize, seed: u64) -> Result<Self, RotateError> {
        let factors = factors(n).ok_or_else(|| {
            RotateError::Invalid(format!("{}; set `rotation` to random", unavailable(n)))
        })?;
        let mut rng = crate::init::rng::seeded(seed);
        let signs = (0..n)
            .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
            .collect();
        Ok(Rotation::Hadamard { signs, factors })
    }

    /// Its order `C`.
    pub fn order(&self) -> usize {
        match self {
            Rotation::Dense { n, .. } => *n,
            Rotation::Hadamard { signs, .. } => signs.len(),
        }
    }

    /// The ±1 diagonal of a Hadamard rotation (empty for a dense one).
    pub fn signs(&self) -> &[f64] {
        match self {
            Rotation::Dense { .. } => &[],
            Rotation::Hadamard { signs, .. } => signs,
        }
    }

    /// `X ← X·Q` for `X` of `rows x C` (row-major).
    pub fn apply_rows(&self, x: &mut [f64]) {
        let n = self.order();
        match self {
            Rotation::Dense { q, .. } => {
                let rows = x.len() / n;
                let src = x.to_vec();
                crate::nn::matmul_f64::matmul_f64(x, &src, q, rows, n, n);
            }
            Rotation::Hadamard { signs, factors } => {
                // Blocks of R rows are transposed to `C x R`, so every Kronecker factor works on
                // contiguous runs of at least R values (an extra innermost axis) and vectorises.
                const R: usize = 64;
                let scale = 1.0 / (n as f64).sqrt();
                x.par_chunks_mut(n * R).for_each(|block| {
                    let rows = block.len() / n;
                    let mut t = vec![0.0; n * rows];
                    let mut scratch = vec![0.0; n * rows];
                    for (r, row) in block.chunks_exact(n).enumerate() {
                        for (i, (&v, &s)) in row.iter().zip(signs).enumerate() {
                            t[i * rows + r] = v * s * scale;
                        }
                    }
                    apply_row(&mut t, factors, &mut scratch);
                    for (r, row) in block.chunks_exact_mut(n).enumerate() {
                        for (i, v) in row.iter_mut().enumerate() {
                            *v = t[i * rows + r];
                        }
                    }
                });
            }
        }
    }

    /// The dense matrix `Q` (`C x C`): rows of the identity pushed through [`Self::apply_rows`].
    pub fn dense(&self) -> Vec<f64> {
        let n = self.order();
        let mut q = vec![0.0; n * n];
        for i in 0..n {
            q[i * n + i] = 1.0;
        }
        self.apply_rows(&mut q);
        q
    }
}
