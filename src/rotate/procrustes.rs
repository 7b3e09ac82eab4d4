//! Orthogonal Procrustes: the orthogonal `R` (`C x C`) minimising `‖A·R − B‖_F` for row-stacked
//! hidden states `A`, `B` (`N x C`). With `M = Aᵀ·B = U·Σ·Vᵀ` (SVD, f64, faer), `R = U·Vᵀ`.

use super::RotateError;

/// A fitted map and how well it fits.
#[derive(Debug, Clone)]
pub struct Procrustes {
    /// `R`, `C x C`, row-major.
    pub r: Vec<f64>,
    /// `‖A·R − B‖_F / ‖B‖_F`.
    pub relative_residual: f64,
    /// `‖A − B‖_F / ‖B‖_F` (the residual of the identity map, for scale).
    pub identity_residual: f64,
}

/// The orthogonal factor `U·Vᵀ` of `m = U·Σ·Vᵀ` (`c x c`, row-major, SVD in f64): the
/// orthogonal `R` maximising `tr(Rᵀ·m)`, so for `m = Xᵀ·Y` the one minimising `‖X·R − Y‖_F`.
pub fn polar(m: &[f64], c: usize) -> Result<Vec<f64>, RotateError> {
    if m.iter().any(|x| !x.is_finite()) {
        return Err(RotateError::Invalid(
            "Procrustes on weights or hidden states that are not finite".into(),
        ));
    }
    let mat = faer::Mat::<f64>::from_fn(c, c, |i, j| m[i * c + j]);
    let svd = mat
        .svd()
        .map_err(|e| RotateError::Invalid(format!("SVD did not converge: {e:?}")))?;
    let (u, v) = (svd.U(), svd.V());
    let u: Vec<f64> = (0..c * c).map(|i| u[(i / c, i % c)]).collect();
    let vt: Vec<f64> = (0..c * c).map(|i| v[(i % c, i / c)]).collect();
    let mut r = vec![0.0f64; c * c];
    crate::nn::matmul_f64::matmul_f64(&mut r, &u, &vt, c, c, c);
    Ok(r)
}

/// Fits `R` for `a`, `b` of `n x c` (row-major, f32 hidden states).
pub fn procrustes(a: &[f32], b: &[f32], c: usize) -> Result<Procrustes, RotateError> {
    if c == 0 || a.len() != b.len() || !a.len().is_multiple_of(c) || a.is_empty() {
        return Err(RotateError::Invalid(format!(
            "Procrustes needs two N x {c} matrices of equal shape (got {} and {} values)",
            a.len(),
            b.len()
        )));
    }
    let n = a.len() / c;
    // M = Aᵀ·B in f64.
    let mut m = vec![0.0f64; c * c];
    for t in 0..n {
        let (ar, br) = (&a[t * c..(t + 1) * c], &b[t * c..(t + 1) * c]);
        for (i, &x) in ar.iter().enumerate() {
            let x = f64::from(x);
            let row = &mut m[i * c..(i + 1) * c];
            row.iter_mut()
                .zip(br)
                .for_each(|(o, &y)| *o += x * f64::from(y));
        }
    }
    let r = polar(&m, c)?;
    let (mut res, mut id, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for t in 0..n {
        let (ar, br) = (&a[t * c..(t + 1) * c], &b[t * c..(t + 1) * c]);
        for j in 0..c {
            let mapped: f64 = (0..c).map(|i| f64::from(ar[i]) * r[i * c + j]).sum();
            let y = f64::from(br[j]);
            res += (mapped - y).powi(2);
            id += (f64::from(ar[j]) - y).powi(2);
            nb += y * y;
        }
    }
    Ok(Procrustes {
        r,
        relative_residual: (res / nb).sqrt(),
        identity_residual: (id / nb).sqrt(),
    })
}
