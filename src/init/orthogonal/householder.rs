//! The `householder` method: Stewart's (1980) construction. Draw `v_k ~ N(0, I_{m-k})` for
//! `k = 0..n`, let `H_k` be the reflector (acting on rows `k..m`) that maps `v_k` to
//! `-sign(v_k1)‖v_k‖ e_1`, and return `H_0 H_1 ⋯ H_{n-1} E_n D` where `E_n` is the first `n`
//! columns of the identity and `D = diag(-sign(v_k1))`. This is exactly the law of the
//! sign-fixed QR of a Gaussian matrix (Haar), at `O(m n²)` cost: the reflectors are applied
//! right to left to the `m x n` block, and no `m x m` matrix is ever formed.

use crate::init::rng::{Rng, fill_standard_normal};

/// A Haar `m x n` (`m >= n`) matrix with orthonormal columns, column-major.
pub(super) fn stewart(m: usize, n: usize, rng: &mut Rng) -> Vec<f64> {
    // Reflector k: unit vector u_k (length m - k) with H_k = I - 2 u_k u_kᵀ, and sign d_k.
    let mut us: Vec<Vec<f64>> = Vec::with_capacity(n);
    let mut d = Vec::with_capacity(n);
    for k in 0..n {
        let mut v = vec![0.0; m - k];
        fill_standard_normal(rng, &mut v);
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let s = if v[0] < 0.0 { -1.0 } else { 1.0 };
        // u = v + sign(v_1)‖v‖ e_1 avoids cancellation; H maps v to -sign(v_1)‖v‖ e_1.
        v[0] += s * norm;
        let un = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if un > 0.0 {
            v.iter_mut().for_each(|x| *x /= un);
        }
        us.push(v);
        d.push(-s);
    }
    // Q = E_n D, then Q <- H_k Q for k = n-1 down to 0. H_k only touches rows k..m, and
    // columns j < k of the partial product are still e_j there (zero in rows >= k), so only
    // columns k..n need updating.
    let mut q = vec![0.0; m * n];
    for j in 0..n {
        q[j * m + j] = d[j];
    }
    for k in (0..n).rev() {
        let u = &us[k];
        for j in k..n {
            let col = &mut q[j * m + k..(j + 1) * m];
            let dot: f64 = u.iter().zip(col.iter()).map(|(a, b)| a * b).sum();
            let f = 2.0 * dot;
            col.iter_mut().zip(u).for_each(|(c, a)| *c -= f * a);
        }
    }
    q
}
