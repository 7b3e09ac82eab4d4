//! Sampling the next token from logits: temperature, top-k, and greedy decoding at
//! temperature 0. Draws come from the project's seeded RNG, so a seed fixes the text.
//!
//! `p_i ∝ exp(l_i / τ)` over the `k` largest logits (all when `k` is 0 or ≥ V); the draw is
//! one uniform number inverted through the cumulative distribution, in f64.

use rand::Rng as _;

use crate::init::rng::Rng;

/// The next token id from `logits` (one row of `V`).
pub fn sample_next(logits: &[f32], temperature: f32, top_k: usize, rng: &mut Rng) -> u32 {
    let greedy = || {
        let mut best = 0;
        for (i, &l) in logits.iter().enumerate() {
            if l > logits[best] {
                best = i;
            }
        }
        best as u32
    };
    if temperature <= 0.0 {
        return greedy();
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    let k = if top_k == 0 || top_k >= logits.len() {
        logits.len()
    } else {
        // Stable order on ties (lower id first) keeps the draw reproducible.
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        top_k
    };
    let kept = &order[..k];
    let max = kept.iter().map(|&i| logits[i]).fold(f32::MIN, f32::max) as f64;
    let weights: Vec<f64> = kept
        .iter()
        .map(|&i| ((logits[i] as f64 - max) / temperature as f64).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    if !(total.is_finite() && total > 0.0) {
        return greedy();
    }
    let mut u = rng.random::<f64>() * total;
    for (w, &i) in weights.iter().zip(kept) {
        if u < *w {
            return i as u32;
        }
        u -= w;
    }
    kept[k - 1] as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::rng::seeded;

    #[test]
    fn greedy_top_k_and_frequencies() {
        let logits = [0.0, 2.0, 1.0, -1.0];
        let mut rng = seeded(0);
        assert_eq!(sample_next(&logits, 0.0, 0, &mut rng), 1);
        for _ in 0..200 {
            assert!(matches!(sample_next(&logits, 1.0, 2, &mut rng), 1 | 2));
        }
        // Full softmax: p(1) = e^2 / (1 + e^2 + e + e^-1) ≈ 0.636; 4000 draws, 5 sigma ≈ 0.038.
        let n = 4000;
        let hits = (0..n)
            .filter(|_| sample_next(&logits, 1.0, 0, &mut rng) == 1)
            .count();
        let p = (2f64).exp() / (1.0 + (2f64).exp() + 1f64.exp() + (-1f64).exp());
        assert!((hits as f64 / n as f64 - p).abs() < 0.04, "{hits}");
    }
}
