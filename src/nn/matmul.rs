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
    let lda = if ta == Trans::No { k } else { m };
    let ldb = if tb == Trans::No { n } else { k };
    let a = Operand {
        x: a,
        ld: lda,
        t: ta,
    };
    let b = Operand {
        x: b,
        ld: ldb,
        t: tb,
    };
    // gemm's own threading splits the output into tiles; on these shapes (thousands of
    // tokens by a few hundred features) two halves by hand are faster (measured with
    // examples/gemm_shapes: +0-20% on rows, +2-18% on the weight gradients' long `k`). The
    // split depends only on the shape, never on the thread count, so results are the same
    // bits on any pool; each half still lets gemm use half the threads.
    let part = (threads / 2).max(1);
    if threads > 1 && m >= SPLIT_MIN && ta == Trans::No {
        let h = m / 2;
        let (o0, o1) = out.split_at_mut(h * n);
        rayon::join(
            || matmul_strided(o0, n, a, b, (h, k, n), accumulate, 1.0, part),
            || {
                matmul_strided(
                    o1,
                    n,
                    a.skip_rows(h),
                    b,
                    (m - h, k, n),
                    accumulate,
                    1.0,
                    part,
                )
            },
        );
        return;
    }
    if threads > 1 && k >= 2 * SPLIT_MIN && ta == Trans::Yes {
        let h = k / 2;
        let mut tmp = vec![0.0f32; m * n];
        rayon::join(
            || matmul_strided(out, n, a, b, (m, h, n), accumulate, 1.0, part),
            || {
                matmul_strided(
                    &mut tmp,
                    n,
                    a.skip_cols(h),
                    b.skip_rows(h),
                    (m, k - h, n),
                    false,
                    1.0,
                    part,
                )
            },
        );
        super::simd::add_assign(out, &tmp);
        return;
    }
    matmul_strided(out, n, a, b, (m, k, n), accumulate, 1.0, threads);
}

/// Rows (or, for weight gradients, reduction length / 2) from which [`matmul`] splits a
/// product in two by hand.
const SPLIT_MIN: usize = 512;

/// A row-major matrix operand inside a larger buffer: row `i` of the *stored* matrix starts
/// at `i * ld`; `t` says whether the product uses it transposed.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The buffer (the matrix starts at its first element).
    pub x: &'a [f32],
    /// Leading dimension: elements between the starts of consecutive stored rows.
    pub ld: usize,
    /// Whether the product uses the transpose.
    pub t: Trans,
}

impl<'a> Operand<'a> {
    /// The operand without its first `r` rows of `op(x)`, whatever the storage orientation.
    fn skip_rows(self, r: usize) -> Self {
        let at = if self.t == Trans::No { r * self.ld } else { r };
        Operand {
            x: &self.x[at..],
            ..self
        }
    }

    /// The operand without its first `c` columns of `op(x)`.
    fn skip_cols(self, c: usize) -> Self {
        let at = if self.t == Trans::No { c } else { c * self.ld };
        Operand {
            x: &self.x[at..],
            ..self
        }
    }
}

/// `out = beta_one * out + scale · op(a) · op(b)` with `(m, k, n)` the product's shape and
/// `out` row-major with leading dimension `ldo` (a block of a larger matrix, e.g. the causal
/// lower-triangle blocks of attention scores).
#[allow(clippy::too_many_arguments)]
pub fn matmul_strided(
    out: &mut [f32],
    ldo: usize,
    a: Operand,
    b: Operand,
    (m, k, n): (usize, usize, usize),
    accumulate: bool,
    scale: f32,
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        ldo >= n && out.len() >= span(m, n, ldo),
        "matmul: out too short"
    );
    // SAFETY: `out` is an exclusive borrow covering every element written (checked above).
    unsafe {
        matmul_raw(
            out.as_mut_ptr(),
            ldo,
            a,
            b,
            (m, k, n),
            accumulate,
            scale,
            threads,
        )
    }
}

/// Elements a row-major `rows x cols` block with leading dimension `ld` spans.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    (rows - 1) * ld + cols
}

/// [`matmul_strided`] into a raw output, for callers whose parallel tasks write interleaved
/// but disjoint blocks of one buffer (attention heads are columns of the same rows).
///
/// # Safety
/// Elements `out + i·ldo + j` for `i < m`, `j < n` must be valid for reads and writes and not
/// accessed by anything else during the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul_raw(
    out: *mut f32,
    ldo: usize,
    a: Operand,
    b: Operand,
    (m, k, n): (usize, usize, usize),
    accumulate: bool,
    scale: f32,
    threads: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    // Stored shapes: a is m x k (or k x m), b is k x n (or n x k); check the last element.
    let (ar, ac) = if a.t == Trans::No { (m, k) } else { (k, m) };
    let (br, bc) = if b.t == Trans::No { (k, n) } else { (n, k) };
    if k > 0 {
        assert!(
            a.ld >= ac && a.x.len() >= span(ar, ac, a.ld),
            "matmul: a too short"
        );
        assert!(
            b.ld >= bc && b.x.len() >= span(br, bc, b.ld),
            "matmul: b too short"
        );
    }
    FLOPS.fetch_add(2 * (m * n * k) as u64, Ordering::Relaxed);
    // Element (i, j) of op(a) is at i*rs + j*cs.
    let strides = |o: Operand| match o.t {
        Trans::No => (o.ld as isize, 1),
        Trans::Yes => (1, o.ld as isize),
    };
    let ((a_rs, a_cs), (b_rs, b_cs)) = (strides(a), strides(b));
    let par = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    // SAFETY: the asserts above keep every read of a and b in bounds; the caller guarantees
    // the output block.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out,
            1,
            ldo as isize,
            accumulate,
            a.x.as_ptr(),
            a_cs,
            a_rs,
            b.x.as_ptr(),
            b_cs,
            b_rs,
            if accumulate { 1.0 } else { 0.0 },
            scale,
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

    #[test]
    fn hand_split_halves_match_naive() {
        // m and k past SPLIT_MIN so both the row split and the reduction split run.
        let (m, k, n) = (600, 1100, 9);
        let a: Vec<f32> = (0..m * k).map(|i| ((i % 13) as f32 - 6.0) * 0.1).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i % 7) as f32 - 3.0) * 0.1).collect();
        for ta in [Trans::No, Trans::Yes] {
            for tb in [Trans::No, Trans::Yes] {
                let want = naive(&a, ta, &b, tb, m, k, n);
                let mut got = vec![1.0; m * n];
                matmul(&mut got, &a, ta, &b, tb, m, k, n, true, 2);
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - 1.0 - w).abs() < 1e-3, "{ta:?} {tb:?}: {g} vs {w}");
                }
            }
        }
    }
}
