//! The `svd` method: the orthogonal polar factor `U Vᵀ` of an `m x n` Gaussian matrix
//! `G = U Σ Vᵀ` (thin SVD, faer, sequential). It is `G (GᵀG)^{-1/2}`, Haar because `G`'s law is
//! invariant under left multiplication by any orthogonal matrix.

use faer::diag::Diag;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::svd::{ComputeSvdVectors, svd};
use faer::{Accum, Mat, Par};

use super::gaussian;
use crate::init::InitError;
use crate::init::rng::Rng;

/// A Haar `m x n` (`m >= n`) matrix with orthonormal columns, column-major.
pub(super) fn polar(m: usize, n: usize, rng: &mut Rng) -> Result<Vec<f64>, InitError> {
    let g = gaussian(m, n, rng);
    let a = Mat::<f64>::from_fn(m, n, |i, j| g[j * m + i]);
    let mut u = Mat::<f64>::zeros(m, n);
    let mut v = Mat::<f64>::zeros(n, n);
    let mut s = Diag::<f64>::zeros(n);
    let par = Par::Seq;
    let thin = ComputeSvdVectors::Thin;
    svd(
        a.as_ref(),
        s.as_mut(),
        Some(u.as_mut()),
        Some(v.as_mut()),
        par,
        MemStack::new(&mut MemBuffer::new(faer::linalg::svd::svd_scratch::<f64>(
            m,
            n,
            thin,
            thin,
            par,
            Default::default(),
        ))),
        Default::default(),
    )
    .map_err(|e| InitError::Numerical(format!("SVD of a {m}x{n} Gaussian matrix: {e:?}")))?;
    let mut w = Mat::<f64>::zeros(m, n);
    faer::linalg::matmul::matmul(
        w.as_mut(),
        Accum::Replace,
        u.as_ref(),
        v.transpose(),
        1.0,
        par,
    );
    let mut out = vec![0.0; m * n];
    for j in 0..n {
        for i in 0..m {
            out[j * m + i] = w[(i, j)];
        }
    }
    Ok(out)
}
