//! Row-major f32 matrix products on top of the `gemm` crate, into preallocated outputs.
//!
//! `gemm` picks AVX2/FMA or AVX-512 kernels at run time, so release builds stay portable.

use gemm::Parallelism;
use std::sync::atomic::{AtomicU64, Ordering};

/// FLOPs (2 per multiply-add) of every [`matmul`] call in this process, so a benchmark or a
/// test can measure which products ran (e.g. that no weight gradient of a frozen weight did).
static FLOPS: AtomicU64 = AtomicU64::new(0);

/// Total FLOPs of all [`matmul`] calls so far in this process (all threads).
pub fn flops_counted() -> u64 {
    FLOPS.load(Ordering::Relaxed)
}

/// Whether an operand is used as stored or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trans {
    /// Use the matrix as stored.
    No,
    /// Use its transpose.
    Yes,
}

/// `out (m x n) = beta_one * out + op(a) (m x k) · op(b) (k x n)`, all row-major and contiguous.
///
/// `a` is stored `m x k` (or `k x m` when `ta` is [`Trans::Yes`]); `b` is stored `k x n` (or
/// `n x k`). With `accumulate` the product is added to `out`, otherwise `out` is overwritten.
/// `threads` > 1 lets gemm split the work over rayon; use 1 inside an outer parallel loop.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    out: &mut [f32],
    a: &[f32],
    ta: Trans,
    b: &[f32],
    tb: Trans,
    m: usize,
    k: usize,
    n: usize,
    accumulate: bool,
    threads: usize,
) {
    assert_eq!(out.len(), m * n, "matmul: out has the wrong length");
    assert_eq!(a.len(), m * k, "matmul: a has the wrong length");
    assert_eq!(b.len(), k * n, "matmul: b has the wrong length");
    if m == 0 || n == 0 {
        return;
    }
    FLOPS.fetch_add(2 * (m * n * k) as u64, Ordering::Relaxed);
    // Strides for row-major storage: element (i, j) of a row-major r x c matrix is at i*c + j.
    let (a_rs, a_cs) = match ta {
        Trans::No => (k as isize, 1),
        Trans::Yes => (1, m as isize),
    };
    let (b_rs, b_cs) = match tb {
        Trans::No => (n as isize, 1),
        Trans::Yes => (1, k as isize),
    };
    let par = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    // SAFETY: the length asserts above guarantee every index the strides reach is in bounds.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            if accumulate { 1.0 } else { 0.0 },
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

    fn naive(a: &[f32], ta: Trans, b: &[f32], tb: Trans, m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let x = if ta == Trans::No {
                        a[i * k + p]
                    } else {
                        a[p * m + i]
                    };
                    let y = if tb == Trans::No {
                        b[p * n + j]
                    } else {
                        b[j * k + p]
                    };
                    s += x * y;
                }
                out[i * n + j] = s;
            }
        }
        out
    }

    #[test]
    fn matches_naive_in_all_transpositions() {
        let (m, k, n) = (7, 5, 9);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        for ta in [Trans::No, Trans::Yes] {
            for tb in [Trans::No, Trans::Yes] {
                let want = naive(&a, ta, &b, tb, m, k, n);
                let mut got = vec![1.0; m * n];
                matmul(&mut got, &a, ta, &b, tb, m, k, n, false, 2);
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() < 1e-5, "{ta:?} {tb:?}: {g} vs {w}");
                }
                matmul(&mut got, &a, ta, &b, tb, m, k, n, true, 1);
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - 2.0 * w).abs() < 1e-5);
                }
            }
        }
    }
}
