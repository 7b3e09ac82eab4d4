//! Random matrices with orthonormal columns (tall, `WᵀW = gain² I`) or rows (wide,
//! `WWᵀ = gain² I`), by four methods: Householder QR with the sign fix, the polar factor of an
//! SVD, Stewart's product of random reflectors, and the Cayley transform.
//!
//! Every method works on the tall orientation `m x n` with `m >= n` (a wide request is the
//! transpose of a tall one), computes in f64 with faer run sequentially (so the same seed gives
//! the same bits whatever the thread count), and returns row-major values.

mod cayley;
mod householder;
mod qr;
mod svd;

use super::InitError;
use super::rng::{Rng, seeded};

/// How a random orthogonal matrix is generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrthoMethod {
    /// Householder QR of a Gaussian matrix with the sign fix (Haar).
    Qr,
    /// Orthogonal polar factor `U Vᵀ` of a Gaussian matrix (Haar).
    Svd,
    /// Product of Householder reflectors, Stewart's construction (Haar).
    Householder,
    /// Cayley transform of a random skew-symmetric matrix (not Haar).
    Cayley,
}

impl OrthoMethod {
    /// Every method, in the order tables print them.
    pub const ALL: [OrthoMethod; 4] = [
        OrthoMethod::Qr,
        OrthoMethod::Svd,
        OrthoMethod::Householder,
        OrthoMethod::Cayley,
    ];

    /// The kebab-case name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            OrthoMethod::Qr => "qr",
            OrthoMethod::Svd => "svd",
            OrthoMethod::Householder => "householder",
            OrthoMethod::Cayley => "cayley",
        }
    }

    /// The method with this name, if any.
    pub fn from_name(name: &str) -> Option<OrthoMethod> {
        OrthoMethod::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether the result is Haar-distributed (uniform on the Stiefel manifold).
    pub fn is_haar(self) -> bool {
        !matches!(self, OrthoMethod::Cayley)
    }

    /// One line saying what the method does.
    pub fn description(self) -> &'static str {
        match self {
            OrthoMethod::Qr => {
                "Householder QR of a Gaussian matrix, columns times sign(diag R) (Haar)"
            }
            OrthoMethod::Svd => "polar factor U Vᵀ of a Gaussian matrix's SVD (Haar)",
            OrthoMethod::Householder => {
                "Stewart's product of random Householder reflectors, O(m n²) (Haar)"
            }
            OrthoMethod::Cayley => {
                "Cayley transform (I - A)(I + A)⁻¹ of a Gaussian skew-symmetric A (NOT Haar)"
            }
        }
    }
}

/// Checks the shape and gain every generator accepts.
pub(crate) fn check_args(rows: usize, cols: usize, gain: f64) -> Result<(), InitError> {
    if rows == 0 || cols == 0 {
        return Err(InitError::ZeroDim {
            shape: vec![rows, cols],
        });
    }
    if !gain.is_finite() || gain < 0.0 {
        return Err(InitError::BadGain(gain));
    }
    Ok(())
}

/// Bytes a method holds at once for an `m x n` (`m >= n`) draw, a bound from its buffers:
/// the Gaussian, the factorisation's working copy, `Q` and the row-major result (QR, SVD,
/// Householder: at most five `m x n` and two `n x n` f64 matrices); Cayley forms `m x m`
/// matrices (the skew-symmetric `A`, its LU factors) besides.
pub fn working_bytes(method: OrthoMethod, m: usize, n: usize) -> Option<usize> {
    use crate::io::memory::{bytes, sum};
    let tall = sum(&[bytes(&[5, m, n, 8]), bytes(&[2, n, n, 8])]);
    match method {
        OrthoMethod::Cayley => sum(&[tall, bytes(&[3, m, m, 8])]),
        _ => tall,
    }
}

/// A tall `m x n` (`m >= n`) matrix with orthonormal columns, column-major, by `method`.
fn tall(method: OrthoMethod, m: usize, n: usize, rng: &mut Rng) -> Result<Vec<f64>, InitError> {
    match method {
        OrthoMethod::Qr => Ok(qr::haar_qr(m, n, rng, true)),
        OrthoMethod::Svd => svd::polar(m, n, rng),
        OrthoMethod::Householder => Ok(householder::stewart(m, n, rng)),
        OrthoMethod::Cayley => Ok(cayley::cayley(m, n, rng)),
    }
}

/// A `rows x cols` random orthogonal matrix (row-major, f64) by `method`, scaled by `gain`:
/// orthonormal columns when `rows >= cols` (`WᵀW = gain² I_cols`), orthonormal rows otherwise
/// (`WWᵀ = gain² I_rows`). Same `seed`, same bits.
pub fn orthogonal_f64(
    rows: usize,
    cols: usize,
    method: OrthoMethod,
    gain: f64,
    seed: u64,
) -> Result<Vec<f64>, InitError> {
    check_args(rows, cols, gain)?;
    let (m, n) = (rows.max(cols), rows.min(cols));
    crate::io::memory::check_fits(
        working_bytes(method, m, n),
        format_args!("a {rows} x {cols} {} orthogonal matrix", method.name()),
    )?;
    let mut rng = seeded(seed);
    let mut t = tall(method, m, n, &mut rng)?;
    if rows >= cols {
        t = row_major_of(&t, m, n);
    }
    // (A column-major `cols x rows` tall matrix is, read row-major, its transpose.)
    if gain != 1.0 {
        t.iter_mut().for_each(|v| *v *= gain);
    }
    Ok(t)
}

/// The row-major copy of a column-major `m x n` matrix, a tile of columns at a time so the
/// reads stay in a few streams and the writes in cache lines being filled.
fn row_major_of(t: &[f64], m: usize, n: usize) -> Vec<f64> {
    const TILE: usize = 16;
    let mut out = vec![0.0; m * n];
    for j0 in (0..n).step_by(TILE) {
        let j1 = (j0 + TILE).min(n);
        for (i, row) in out.chunks_exact_mut(n).enumerate() {
            for (j, o) in (j0..j1).zip(&mut row[j0..j1]) {
                *o = t[j * m + i];
            }
        }
    }
    out
}

/// [`orthogonal_f64`] rounded to f32 (computed in f64).
pub fn orthogonal_f32(
    rows: usize,
    cols: usize,
    method: OrthoMethod,
    gain: f64,
    seed: u64,
) -> Result<Vec<f32>, InitError> {
    Ok(orthogonal_f64(rows, cols, method, gain, seed)?
        .into_iter()
        .map(|v| v as f32)
        .collect())
}

/// A Haar-distributed `rows x cols` matrix (row-major, f64) with orthonormal columns when
/// `rows >= cols`, orthonormal rows otherwise, scaled by `gain` (the `qr` method).
pub fn haar_f64(rows: usize, cols: usize, gain: f64, seed: u64) -> Result<Vec<f64>, InitError> {
    orthogonal_f64(rows, cols, OrthoMethod::Qr, gain, seed)
}

/// `‖WᵀW − gain² I‖_F` for a tall row-major `rows x cols` `w` (`‖WWᵀ − gain² I‖_F` when wide),
/// accumulated in f64 so an f32 matrix's own rounding is what is measured.
pub fn ortho_error<T: Copy + Into<f64>>(w: &[T], rows: usize, cols: usize, gain: f64) -> f64 {
    assert_eq!(w.len(), rows * cols, "ortho_error: w has the wrong length");
    let a = faer::Mat::<f64>::from_fn(rows, cols, |i, j| w[i * cols + j].into());
    let tall = rows >= cols;
    let k = rows.min(cols);
    let mut g = faer::Mat::<f64>::zeros(k, k);
    if tall {
        faer::linalg::matmul::matmul(
            g.as_mut(),
            faer::Accum::Replace,
            a.transpose(),
            a.as_ref(),
            1.0,
            faer::Par::Seq,
        );
    } else {
        faer::linalg::matmul::matmul(
            g.as_mut(),
            faer::Accum::Replace,
            a.as_ref(),
            a.transpose(),
            1.0,
            faer::Par::Seq,
        );
    }
    let g2 = gain * gain;
    let mut s = 0.0;
    for j in 0..k {
        for i in 0..k {
            let d = g[(i, j)] - if i == j { g2 } else { 0.0 };
            s += d * d;
        }
    }
    s.sqrt()
}

/// A column-major `m x n` standard Gaussian matrix.
pub(crate) fn gaussian(m: usize, n: usize, rng: &mut Rng) -> Vec<f64> {
    let mut a = vec![0.0; m * n];
    super::rng::fill_standard_normal(rng, &mut a);
    a
}

/// The `qr` method's `n x n` matrix *without* the sign fix (row-major): the biased law the
/// seed's pseudo-code produces. Kept only so tests can show that the fix changes the law.
#[doc(hidden)]
pub fn qr_without_sign_fix(n: usize, seed: u64) -> Vec<f64> {
    row_major_of(&qr::haar_qr(n, n, &mut seeded(seed), false), n, n)
}
