//! Softmax cross-entropy over the vocabulary, fused with its gradient.

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
    for (row, &tg) in logits.chunks_exact_mut(v).zip(targets) {
        let mx = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let mut sum = 0.0f32;
        for x in row.iter() {
            sum += (x - mx).exp();
        }
        let logz = mx + sum.ln();
        total += (logz - row[tg as usize]) as f64;
        if grad {
            let inv_n = 1.0 / n as f32;
            for x in row.iter_mut() {
                *x = (*x - logz).exp() * inv_n;
            }
            row[tg as usize] -= inv_n;
        }
    }
    total
}
