//! Random matrices with orthonormal columns (tall, `WᵀW = I`) or rows (wide, `WWᵀ = I`).
//!
//! PLACEHOLDER until the orthogonal-generation work lands: only the Haar QR path exists, done
//! by twice-repeated modified Gram-Schmidt on a Gaussian matrix (which yields the Q factor with
//! a positive diagonal of R, i.e. the sign-fixed, Haar-distributed Q).

use super::InitError;
use super::rng::{fill_standard_normal, seeded};

/// A Haar-distributed `rows x cols` matrix (row-major, f64) with orthonormal columns when
/// `rows >= cols`, orthonormal rows otherwise, scaled by `gain`.
pub fn haar_f64(rows: usize, cols: usize, gain: f64, seed: u64) -> Result<Vec<f64>, InitError> {
    if rows == 0 || cols == 0 {
        return Err(InitError::ZeroDim {
            shape: vec![rows, cols],
        });
    }
    if !gain.is_finite() || gain < 0.0 {
        return Err(InitError::BadGain(gain));
    }
    let (m, n) = if rows >= cols {
        (rows, cols)
    } else {
        (cols, rows)
    };
    // Column-major m x n Gaussian.
    let mut a = vec![0.0; m * n];
    fill_standard_normal(&mut seeded(seed), &mut a);
    for _pass in 0..2 {
        for j in 0..n {
            for p in 0..j {
                let (head, tail) = a.split_at_mut(j * m);
                let qp = &head[p * m..(p + 1) * m];
                let cj = &mut tail[..m];
                let d: f64 = qp.iter().zip(cj.iter()).map(|(x, y)| x * y).sum();
                cj.iter_mut().zip(qp).for_each(|(c, q)| *c -= d * q);
            }
            let cj = &mut a[j * m..(j + 1) * m];
            let norm = cj.iter().map(|x| x * x).sum::<f64>().sqrt();
            cj.iter_mut().for_each(|c| *c /= norm);
        }
    }
    let mut out = vec![0.0; rows * cols];
    for j in 0..n {
        for i in 0..m {
            let v = gain * a[j * m + i];
            if rows >= cols {
                out[i * cols + j] = v;
            } else {
                out[j * cols + i] = v;
            }
        }
    }
    Ok(out)
}

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

/// A `rows x cols` random orthogonal matrix (row-major, f64) by `method`, scaled by `gain`:
/// orthonormal columns when `rows >= cols`, orthonormal rows otherwise.
///
/// PLACEHOLDER: every method currently uses [`haar_f64`].
pub fn orthogonal_f64(
    rows: usize,
    cols: usize,
    method: OrthoMethod,
    gain: f64,
    seed: u64,
) -> Result<Vec<f64>, InitError> {
    let _ = method;
    haar_f64(rows, cols, gain, seed)
}
