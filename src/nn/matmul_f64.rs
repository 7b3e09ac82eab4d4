//! The one f64 matrix product of the project (rotations, theory measurements): row-major
//! `out = a · b` on the `gemm` crate with the thread pool's threads. Decompositions (QR,
//! LU, Cholesky, SVD) stay in `faer`; products go through here.

use gemm::Parallelism;

/// The pool's threads, as `gemm` takes them.
fn parallelism() -> Parallelism {
    let threads = super::threads::current_threads();
    if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    }
}

/// `out (m x n) = a (m x k) · b (k x n)`, f64, row-major, on the pool's threads.
pub fn matmul_f64(out: &mut [f64], a: &[f64], b: &[f64], m: usize, k: usize, n: usize) {
    assert!(out.len() == m * n && a.len() == m * k && b.len() == k * n);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0.0);
        return;
    }
    let par = parallelism();
    // SAFETY: the lengths asserted above cover every index the row-major strides reach.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            1,
            n as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

/// `out (m x n) += aᵀ · b` for `a` of `k x m` and `b` of `k x n` (row-major, f64): the
/// cross-product of two row-stacked samples (Procrustes' `Aᵀ·B`), accumulated block by block.
pub fn add_at_b_f64(out: &mut [f64], a: &[f64], b: &[f64], k: usize, m: usize, n: usize) {
    assert!(out.len() == m * n && a.len() == k * m && b.len() == k * n);
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let par = parallelism();
    // SAFETY: the lengths asserted above cover every index the strides reach; `aᵀ` is `a`
    // read with its row and column strides swapped.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            true,
            a.as_ptr(),
            m as isize,
            1,
            b.as_ptr(),
            1,
            n as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_the_textbook_product() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
        let mut out = vec![f64::NAN; m * n];
        matmul_f64(&mut out, &a, &b, m, k, n);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                assert!((out[i * n + j] - want).abs() < 1e-12);
            }
        }
        let mut empty = vec![1.0; 4];
        matmul_f64(&mut empty, &[], &[], 2, 0, 2);
        assert_eq!(empty, [0.0; 4]);
    }

    #[test]
    fn transposed_product_accumulates() {
        let (k, m, n) = (6, 4, 3);
        let a: Vec<f64> = (0..k * m).map(|i| (i as f64 * 0.29).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.17).cos()).collect();
        let mut out = vec![1.0; m * n];
        add_at_b_f64(&mut out, &a, &b, k, m, n);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = 1.0 + (0..k).map(|p| a[p * m + i] * b[p * n + j]).sum::<f64>();
                assert!((out[i * n + j] - want).abs() < 1e-12);
            }
        }
    }
}
