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
    // The Gaussian is factored where it was drawn (column-major), and `Q` is formed in the
    // buffer that is returned: no copies of the `m x n` matrix.
    let mut g = gaussian(m, n, rng);
    let mut a = faer::MatMut::from_column_major_slice_mut(&mut g, m, n);
    let bs = factor::recommended_block_size::<f64>(m, n);
    let mut coeff = Mat::<f64>::zeros(bs, n);
    let par = Par::Seq;
    let factor_scratch = factor::qr_in_place_scratch::<f64>(m, n, bs, par, Default::default());
    let apply_scratch =
        householder::apply_block_householder_on_the_left_in_place_scratch::<f64>(m, bs, n);
    let mut buf = MemBuffer::new(factor_scratch.or(apply_scratch));
    factor::qr_in_place(
        a.as_mut(),
        coeff.as_mut(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    );
    let a = a.as_ref();
    let mut out = vec![0.0; m * n];
    let mut q = faer::MatMut::from_column_major_slice_mut(&mut out, m, n);
    for j in 0..n {
        q[(j, j)] = 1.0;
    }
    // `Q = H_0 H_1 ⋯ E_n`, accumulated from the last block of reflectors back (LAPACK's
    // `orgqr`): before block `j0..j1` is applied, columns `< j0` are still `e_j`, zero in rows
    // `j0..`, so the block acts on rows and columns `j0..` only.
    let mut j1 = n;
    while j1 > 0 {
        let j0 = (j1 - 1) / bs * bs;
        householder::apply_block_householder_on_the_left_in_place_with_conj(
            a.get(j0.., j0..j1),
            coeff.get(..j1 - j0, j0..j1),
            Conj::No,
            q.as_mut().get_mut(j0.., j0..),
            par,
            MemStack::new(&mut buf),
        );
        j1 = j0;
    }
    for j in 0..n {
        if sign_fix && a[(j, j)] < 0.0 {
            q.as_mut().col_mut(j).iter_mut().for_each(|x| *x = -*x);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::rng::seeded;

    /// `Q` is the Q factor of the seed's own Gaussian `G`: `R = QᵀG` is upper triangular with
    /// a positive diagonal and `QR = G`. Shapes cover both paths (CholeskyQR2 at `m >= 4n`),
    /// square ones, and widths that are not a multiple of the block size, where the blocks of
    /// reflectors that form `Q` act on a trailing corner only.
    #[test]
    fn q_is_the_sign_fixed_q_factor_of_the_seeds_gaussian() {
        for (m, n) in [
            (256, 256),
            (300, 200),
            (37, 37),
            (129, 65),
            (100, 20),
            (70, 70),
        ] {
            let q = haar_qr(m, n, &mut seeded(11), true);
            let g = gaussian(m, n, &mut seeded(11));
            let col = |x: &[f64], j: usize| x[j * m..(j + 1) * m].to_vec();
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
            let mut worst_below = 0.0f64;
            let mut worst_residual = 0.0f64;
            for j in 0..n {
                let gj = col(&g, j);
                let r: Vec<f64> = (0..n).map(|i| dot(&col(&q, i), &gj)).collect();
                assert!(r[j] > 0.0, "{m}x{n}: R[{j},{j}] = {}", r[j]);
                worst_below = r[j + 1..].iter().fold(worst_below, |w, x| w.max(x.abs()));
                for (row, gv) in gj.iter().enumerate() {
                    let qr: f64 = (0..=j).map(|i| q[i * m + row] * r[i]).sum();
                    worst_residual = worst_residual.max((qr - gv).abs());
                }
            }
            assert!(
                worst_below < 1e-11,
                "{m}x{n}: |R| below the diagonal {worst_below:e}"
            );
            assert!(
                worst_residual < 1e-11,
                "{m}x{n}: |QR - G| {worst_residual:e}"
            );
        }
    }
}
