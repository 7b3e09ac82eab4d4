//! Softmax cross-entropy over the vocabulary, fused with its gradient.

use super::simd;

/// Mean over `N` rows of `-log softmax(logits)[target]`. With `grad`, the logits are
/// overwritten by `d loss / d logits = (softmax - onehot) / N` (the buffer is reused, as llm.c).
pub fn forward(logits: &mut [f32], targets: &[u32], v: usize, grad: bool) -> f32 {
    use rayon::prelude::*;
    let n = targets.len();
    // Fixed chunking, summed in order: the loss is the same for any thread count.
    let rows = 64;
    let partial: Vec<f64> = logits
        .par_chunks_mut(rows * v)
        .zip(targets.par_chunks(rows))
        .map(|(lg, tg)| rows_loss(lg, tg, v, n, grad))
        .collect();
    (partial.iter().sum::<f64>() / n as f64) as f32
}

/// Sum of the losses of a block of rows (and their gradients when `grad`).
fn rows_loss(logits: &mut [f32], targets: &[u32], v: usize, n: usize, grad: bool) -> f64 {
    let mut total = 0.0f64;
    let inv_n = 1.0 / n as f32;
    for (row, &tg) in logits.chunks_exact_mut(v).zip(targets) {
        let mx = simd::max(row);
        let target = row[tg as usize];
        let sum = if grad {
            // The row becomes softmax / n, then the target's one-hot / n is subtracted.
            let sum = simd::exp_shifted_sum(row, mx);
            simd::scale(row, inv_n / sum);
            row[tg as usize] -= inv_n;
            sum
        } else {
            simd::sum_exp_shifted(row, mx)
        };
        total += (mx + sum.ln() - target) as f64;
    }
    total
}
