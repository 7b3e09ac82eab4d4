//! The `cayley` method: `Q = (I − A)(I + A)⁻¹` for a skew-symmetric `m x m` `A` with
//! independent standard normal entries above the diagonal, first `n` columns. `Q` is orthogonal
//! with determinant +1 (never −1) and its law is **not** Haar; it is kept because it is cheap to
//! differentiate and the seed lists it. The two factors commute, so the first `n` columns are
//! the solution `X` of `(I + A) X = (I − A) E_n` (LU with partial pivoting, faer, sequential).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::{factor, solve};
use faer::{Conj, Mat, Par};

use crate::init::rng::{Rng, fill_standard_normal};

/// An `m x n` (`m >= n`) matrix with orthonormal columns, column-major (not Haar).
pub(super) fn cayley(m: usize, n: usize, rng: &mut Rng) -> Vec<f64> {
    let mut upper = vec![0.0; m * (m - 1) / 2];
    fill_standard_normal(rng, &mut upper);
    let mut a = Mat::<f64>::zeros(m, m);
    let mut idx = 0;
    for i in 0..m {
        for j in i + 1..m {
            a[(i, j)] = upper[idx];
            a[(j, i)] = -upper[idx];
            idx += 1;
        }
    }
    // lu = I + A; rhs = (I - A) E_n = E_n - A[:, :n].
    let mut lu = Mat::<f64>::from_fn(m, m, |i, j| a[(i, j)] + if i == j { 1.0 } else { 0.0 });
    let mut rhs = Mat::<f64>::from_fn(m, n, |i, j| if i == j { 1.0 } else { 0.0 } - a[(i, j)]);
    let par = Par::Seq;
    let mut fwd = vec![0usize; m];
    let mut bwd = vec![0usize; m];
    let (_, perm) = factor::lu_in_place(
        lu.as_mut(),
        &mut fwd,
        &mut bwd,
        par,
        MemStack::new(&mut MemBuffer::new(
            factor::lu_in_place_scratch::<usize, f64>(m, m, par, Default::default()),
        )),
        Default::default(),
    );
    solve::solve_in_place_with_conj(
        lu.as_ref(),
        lu.as_ref(),
        perm,
        Conj::No,
        rhs.as_mut(),
        par,
        MemStack::new(&mut MemBuffer::new(solve::solve_in_place_scratch::<
            usize,
            f64,
        >(m, n, par))),
    );
    let mut out = vec![0.0; m * n];
    for j in 0..n {
        for i in 0..m {
            out[j * m + i] = rhs[(i, j)];
        }
    }
    out
}
