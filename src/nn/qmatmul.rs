//! `Y = X·Wᵀ` for a block of activation rows (prefill, perplexity windows) and a weight in
//! any GGUF storage type, without an f32 copy of the whole weight.
//!
//! `W` (`out x in`) is cut into panels of `PANEL` rows. Each rayon task dequantises one panel
//! into its thread's reused buffer (the same values as [`dequantize`](super::qmatvec::dequantize))
//! and multiplies it with `gemm` single-threaded into its own columns of `Y`; an F32 weight is
//! read in place. The panel split depends only on the shape, so results do not depend on the
//! thread count. One or two rows go through [`matvec_many_with`] instead, which
//! reads each weight once per row without dequantising a panel. With activations rounded to
//! 8 bits in every product ([`MatvecInput::Q8All`]) a panel is multiplied by integer dot
//! products in its stored form instead of dequantised.

use std::cell::RefCell;

use rayon::prelude::*;

use super::matmul::{Operand, Trans, matmul_raw};
use super::qmatvec::{
    MatvecInput, Q8Vector, QMatrix, dequantize_rows, matvec_many_with, matvec_row_q8,
    matvec4_row_q8, q8_supports,
};

/// Weight rows per task: a 64 x 1536 f32 panel is 384 KiB, within a core's L2.
const PANEL: usize = 64;

/// Rows of `X` up to which each row is a matrix-vector product.
const MATVEC_ROWS: usize = 2;

thread_local! {
    /// Each thread's panel buffer, grown to the largest panel seen and then reused.
    static PANEL_BUF: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `Y` as a pointer shared by panel tasks, which write disjoint columns.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: each task writes only the columns of its own panel (see `matmul_xwt`).
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// `y (N x out) = x (N x in) · Wᵀ`, with `W` the `out x in` matrix `w`.
pub fn matmul_xwt(y: &mut [f32], x: &[f32], n: usize, w: QMatrix) {
    matmul_xwt_many(&mut [(y, w)], x, n);
}

/// `y_j = x · W_jᵀ` for every job (the linear layers reading one input, e.g. Q, K and V):
/// the panels of all of them share one parallel loop, so a small matrix (K and V are three
/// panels each) does not leave a thread idle.
pub fn matmul_xwt_many(jobs: &mut [(&mut [f32], QMatrix)], x: &[f32], n: usize) {
    // The f32 path never touches the scratch (an empty vector allocates nothing).
    matmul_xwt_many_with(jobs, x, n, MatvecInput::F32, &mut Q8Vector::default());
}

/// [`matmul_xwt_many`] whose input is read as `input` says. One or two rows (a decode step)
/// round their input for [`MatvecInput::Q8`] and `Q8All`; longer blocks only for
/// [`MatvecInput::Q8All`]: the rows
/// are rounded once into `scratch` and every weight with an integer dot product
/// ([`q8_supports`]) multiplies them in integers, panel by panel, each panel's rows kept in
/// cache while every row of `X` passes; other weights read f32.
pub fn matmul_xwt_many_with(
    jobs: &mut [(&mut [f32], QMatrix)],
    x: &[f32],
    n: usize,
    input: MatvecInput,
    scratch: &mut Q8Vector,
) {
    for (y, w) in jobs.iter() {
        assert!(
            y.len() == n * w.rows() && x.len() == n * w.cols(),
            "matmul_xwt: y {} x {} for N = {n} and a {}x{} weight",
            y.len(),
            x.len(),
            w.rows(),
            w.cols()
        );
    }
    if n == 0 {
        return;
    }
    if n == 1 {
        matvec_many_with(jobs, x, input, scratch);
        return;
    }
    if n <= MATVEC_ROWS {
        for (y, w) in jobs.iter_mut() {
            let (rows, cols) = (w.rows(), w.cols());
            for (yr, xr) in y.chunks_exact_mut(rows).zip(x.chunks_exact(cols)) {
                matvec_many_with(&mut [(yr, *w)], xr, input, scratch);
            }
        }
        return;
    }
    // Integer products: the whole block of rows rounded once, each weight type that has an
    // integer dot product reads it; the others read f32.
    let cols = jobs.first().map_or(0, |(_, w)| w.cols());
    let q8 = input == MatvecInput::Q8All
        && cols.is_multiple_of(32)
        && jobs.iter().any(|(_, w)| q8_supports(w.ty()));
    if q8 {
        scratch.quantize(x);
    }
    let xq = &*scratch;
    // (output, its weight, index of its first panel in the flat panel list)
    let mut first = 0;
    let parts: Vec<(Out, QMatrix, usize)> = jobs
        .iter_mut()
        .map(|(y, w)| {
            let start = first;
            first += w.rows().div_ceil(PANEL);
            (Out(y.as_mut_ptr()), *w, start)
        })
        .collect();
    (0..first).into_par_iter().for_each(|i| {
        let j = parts.partition_point(|p| p.2 <= i) - 1;
        let (out, w, start) = parts[j];
        if q8 && q8_supports(w.ty()) {
            q8_panel_product(out, w, xq, n, (i - start) * PANEL);
        } else {
            panel_product(out, w, x, n, (i - start) * PANEL);
        }
    });
}

/// Weight rows per integer product call: 16 rows of 1536 4-bit weights are 13.5 KiB, kept in
/// L1 while every row of `X` passes.
const Q8_ROWS: usize = 16;

/// Columns `r0..r0 + PANEL` of `y = x·Wᵀ` by integer dot products with the rounded rows `xq`.
fn q8_panel_product(out: Out, w: QMatrix, xq: &Q8Vector, n: usize, r0: usize) {
    let (rows, cols) = (w.rows(), w.cols());
    let end = (r0 + PANEL).min(rows);
    for s0 in (r0..end).step_by(Q8_ROWS) {
        let sub = w.slice_rows(s0..(s0 + Q8_ROWS).min(end));
        // SAFETY: columns s0..s0 + sub.rows() of row i of `y` (row stride `rows`) are in
        // bounds (lengths asserted by the caller) and written by this panel's task only.
        let y = |i: usize| unsafe {
            std::slice::from_raw_parts_mut(out.0.add(i * rows + s0), sub.rows())
        };
        // Four rows of X per pass over the weights (each block unpacked once for them).
        let mut i = 0;
        while i + 4 <= n {
            let xs = [0, 1, 2, 3].map(|j| xq.row(i + j, cols));
            matvec4_row_q8([y(i), y(i + 1), y(i + 2), y(i + 3)], sub, xs);
            i += 4;
        }
        for i in i..n {
            matvec_row_q8(y(i), sub, xq.row(i, cols));
        }
    }
}

/// Columns `r0..r0 + PANEL` of `y = x·Wᵀ` (fewer at the end).
fn panel_product(out: Out, w: QMatrix, x: &[f32], n: usize, r0: usize) {
    let (rows, cols) = (w.rows(), w.cols());
    let panel = w.slice_rows(r0..(r0 + PANEL).min(rows));
    let pr = panel.rows();
    let a = Operand {
        x,
        ld: cols,
        t: Trans::No,
    };
    let product = |b: &[f32]| {
        let b = Operand {
            x: b,
            ld: cols,
            t: Trans::Yes,
        };
        // SAFETY: columns r0..r0+pr of every row of `y` (row stride `rows`) are in bounds
        // (lengths asserted by the caller) and written by this panel's task only.
        unsafe { matmul_raw(out.0.add(r0), rows, a, b, (n, cols, pr), false, 1.0, 1) };
    };
    match panel.as_f32() {
        Some(wf) => product(wf),
        None => PANEL_BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            if buf.len() < pr * cols {
                buf.resize(pr * cols, 0.0);
            }
            let b = &mut buf[..pr * cols];
            dequantize_rows(b, panel);
            product(b);
        }),
    }
}
