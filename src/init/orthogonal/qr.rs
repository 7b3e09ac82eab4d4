//! The `qr` method: Householder QR of an `m x n` Gaussian matrix (faer, blocked, sequential),
//! then column `j` of the thin `Q` times `sign(R_jj)`; for clearly tall shapes (`m >= 4n`) the
//! same `Q` by CholeskyQR2, which is faster. Without that sign fix the law of `Q`
//! depends on LAPACK's sign convention and is not Haar (Mezzadri 2007).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::{householder, qr::no_pivoting::factor};
use faer::{Conj, Mat, Par};

use super::gaussian;
use crate::init::rng::Rng;

/// A Haar `m x n` (`m >= n`) matrix with orthonormal columns, column-major.
/// With `sign_fix` false the columns keep faer's signs (LAPACK's convention), which is not
/// Haar; only tests showing the fix matters ask for that.
pub(super) fn haar_qr(m: usize, n: usize, rng: &mut Rng, sign_fix: bool) -> Vec<f64> {
    if sign_fix && m >= 4 * n && n >= 8 {
        // Keep the generator's state so a (not expected) Cholesky failure can redraw the same
        // matrix for the Householder path instead of keeping a copy of it.
        let saved = rng.clone();
        let mut out = gaussian(m, n, rng);
        if cholesky_qr2_in_place(&mut out, m, n) {
            return out;
        }
        *rng = saved;
    }
    let g = gaussian(m, n, rng);
    let mut a = Mat::<f64>::from_fn(m, n, |i, j| g[j * m + i]);
    let bs = factor::recommended_block_size::<f64>(m, n);
    let mut coeff = Mat::<f64>::zeros(bs, n);
    let par = Par::Seq;
    factor::qr_in_place(
        a.as_mut(),
        coeff.as_mut(),
        par,
        MemStack::new(&mut MemBuffer::new(factor::qr_in_place_scratch::<f64>(
            m,
            n,
            bs,
            par,
            Default::default(),
        ))),
        Default::default(),
    );
    let signs: Vec<f64> = (0..n)
        .map(|j| {
            if sign_fix && a[(j, j)] < 0.0 {
                -1.0
            } else {
                1.0
            }
        })
        .collect();
    let mut q = Mat::<f64>::identity(m, n);
    householder::apply_block_householder_sequence_on_the_left_in_place_with_conj(
        a.as_ref(),
        coeff.as_ref(),
        Conj::No,
        q.as_mut(),
        par,
        MemStack::new(&mut MemBuffer::new(
            householder::apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(
                m, bs, n,
            ),
        )),
    );
    let mut out = vec![0.0; m * n];
    for j in 0..n {
        for i in 0..m {
            out[j * m + i] = signs[j] * q[(i, j)];
        }
    }
    out
}

/// CholeskyQR2 (Fukaya et al. 2014) for a well-conditioned tall `a`: twice `R = chol(aᵀa)ᵀ`,
/// `a ← a R⁻¹`. Each `R` has a positive diagonal, so the result is the unique `Q` with
/// `R_jj > 0`: the same (sign-fixed, Haar) `Q` as Householder QR, from two GEMMs and two
/// triangular solves instead of level-2 reflector work. A Gaussian `m x n` with `m >= 4n` has
/// condition number below about 3, far inside CholeskyQR2's range (orthogonality ~1e-15 for
/// condition numbers up to ~1e7). `a` is column-major `m x n`; false if a Cholesky
/// factorisation fails (not expected), leaving `a` garbage.
fn cholesky_qr2_in_place(a: &mut [f64], m: usize, n: usize) -> bool {
    use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
    use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
    let mut a = faer::MatMut::from_column_major_slice_mut(a, m, n);
    let par = Par::Seq;
    let mut gram = Mat::<f64>::zeros(n, n);
    let mut buf = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
    for _pass in 0..2 {
        faer::linalg::matmul::matmul(
            gram.as_mut(),
            faer::Accum::Replace,
            a.as_ref().transpose(),
            a.as_ref(),
            1.0,
            par,
        );
        let ok = cholesky_in_place(
            gram.as_mut(),
            Default::default(),
            par,
            MemStack::new(&mut buf),
            Default::default(),
        );
        if ok.is_err() {
            return false;
        }
        // a R⁻¹ with R = Lᵀ: solve L aᵀ_new = aᵀ.
        solve_lower_triangular_in_place(gram.as_ref(), a.as_mut().transpose_mut(), par);
    }
    true
}
