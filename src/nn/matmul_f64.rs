//! The one f64 matrix product of the project (rotations, theory measurements): row-major
//! `out = a · b` on the `gemm` crate with the thread pool's threads. Decompositions (QR,
//! LU, Cholesky, SVD) stay in `faer`; products go through here.

use gemm::Parallelism;

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
    let threads = super::threads::current_threads();
    let par = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
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
}
