//! Fully connected layer `y = x·Wᵀ + b` with PyTorch's weight layout (`W` is `out x in`).
//!
//! Backward accumulates into the gradient buffers; the weight gradient is optional so frozen
//! weights never pay for a product whose result would be thrown away.

use super::matmul::{Trans, matmul};
use super::simd;
use rayon::prelude::*;

/// Rows per rayon task in the bias passes.
const BIAS_ROWS: usize = 64;

/// Threads for the large products of a model: the rayon pool's size, but at least 2, because
/// `matmul` splits a product by hand only when asked for more than one thread and its
/// results must be the same bits on a pool of any size (on a 1-thread pool the halves simply
/// run one after the other).
pub fn big_threads() -> usize {
    rayon::current_num_threads().max(2)
}

/// `y (N x out) = x (N x in) · wᵀ + bias`, `w` stored `out x in`.
pub fn forward(
    y: &mut [f32],
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    n: usize,
    din: usize,
    dout: usize,
) {
    matmul(
        y,
        x,
        Trans::No,
        w,
        Trans::Yes,
        n,
        din,
        dout,
        false,
        big_threads(),
    );
    if let Some(b) = bias {
        add_bias(y, b);
    }
}

/// `y[r, :] += b` for every row `r` of `y` (rows of `b.len()`).
pub fn add_bias(y: &mut [f32], b: &[f32]) {
    let dout = b.len();
    y.par_chunks_mut(dout * BIAS_ROWS).for_each(|rows| {
        for row in rows.chunks_exact_mut(dout) {
            simd::add_assign(row, b);
        }
    });
}

/// Gradients of [`forward`] except the bias: `dx (+)= dy·w`, `dw += dyᵀ·x` (only when `dw`
/// is given: a frozen weight passes `None` and its product is never computed).
///
/// `accumulate_dx` chooses between adding into `dx` and overwriting it.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    dx: Option<&mut [f32]>,
    dw: Option<&mut [f32]>,
    dy: &[f32],
    x: &[f32],
    w: &[f32],
    n: usize,
    din: usize,
    dout: usize,
    accumulate_dx: bool,
) {
    let threads = big_threads();
    if let Some(dx) = dx {
        matmul(
            dx,
            dy,
            Trans::No,
            w,
            Trans::No,
            n,
            dout,
            din,
            accumulate_dx,
            threads,
        );
    }
    if let Some(dw) = dw {
        matmul(
            dw,
            dy,
            Trans::Yes,
            x,
            Trans::No,
            dout,
            n,
            din,
            true,
            threads,
        );
    }
}

/// `db += Σ_rows dy`. Rows are summed in fixed blocks of `BIAS_ROWS` and the block sums
/// added in order, so the result does not depend on the thread count.
pub fn bias_backward(db: &mut [f32], dy: &[f32]) {
    let dout = db.len();
    let partial: Vec<Vec<f32>> = dy
        .par_chunks(dout * BIAS_ROWS)
        .map(|rows| {
            let mut acc = vec![0.0f32; dout];
            for row in rows.chunks_exact(dout) {
                simd::add_assign(&mut acc, row);
            }
            acc
        })
        .collect();
    for p in &partial {
        simd::add_assign(db, p);
    }
}
