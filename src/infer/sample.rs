//! Sampling the next token from logits, for every model: temperature, top-k, top-p (nucleus),
//! and greedy decoding at temperature 0. Draws come from the project's seeded RNG, so a seed
//! fixes the text.
//!
//! `p_i ∝ exp(l_i / τ)` over the `k` largest logits (all when `k` is 0 or ≥ V), then over the
//! smallest set of the most likely of those whose probability reaches `top_p` (all when
//! `top_p ≥ 1`); ties in rank go to the lower id. The draw is one uniform number inverted
//! through the cumulative distribution, in f64.

use rand::Rng as _;

use crate::init::rng::Rng;

/// The next token id from `logits` (one row of `V`); greedy (the first largest) when
/// `temperature <= 0`.
pub fn sample_next(
    logits: &[f32],
    temperature: f32,
    top_k: usize,
    top_p: f64,
    rng: &mut Rng,
) -> u32 {
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
    let nucleus = top_p < 1.0;
    let k = if top_k == 0 || top_k >= logits.len() {
        logits.len()
    } else {
        top_k
    };
    if k < logits.len() || nucleus {
        // Stable order on ties (lower id first) keeps the draw reproducible.
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    }
    let mut kept = &order[..k];
    let max = kept.iter().map(|&i| logits[i]).fold(f32::MIN, f32::max) as f64;
    let mut weights: Vec<f64> = kept
        .iter()
        .map(|&i| ((logits[i] as f64 - max) / temperature as f64).exp())
        .collect();
    let mut total: f64 = weights.iter().sum();
    if nucleus && total.is_finite() && total > 0.0 {
        // The most likely first: keep the shortest prefix whose mass reaches top_p.
        let (mut acc, mut m) = (0.0, 0);
        for w in &weights {
            acc += w;
            m += 1;
            if acc >= top_p * total {
                break;
            }
        }
        kept = &kept[..m];
        weights.truncate(m);
        total = acc;
    }
    let k = kept.len();
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
        assert_eq!(sample_next(&logits, 0.0, 0, 1.0, &mut rng), 1);
        for _ in 0..200 {
            assert!(matches!(sample_next(&logits, 1.0, 2, 1.0, &mut rng), 1 | 2));
        }
        // Full softmax: p(1) = e^2 / (1 + e^2 + e + e^-1) ≈ 0.636; 4000 draws, 5 sigma ≈ 0.038.
        let n = 4000;
        let hits = (0..n)
            .filter(|_| sample_next(&logits, 1.0, 0, 1.0, &mut rng) == 1)
            .count();
        let p = (2f64).exp() / (1.0 + (2f64).exp() + 1f64.exp() + (-1f64).exp());
        assert!((hits as f64 / n as f64 - p).abs() < 0.04, "{hits}");
        // Top-p 0.7: id 1 (0.636) alone is short of 0.7, so ids 1 and 2 are kept
        // (0.636 + 0.234 = 0.870), with p(1) = e^2 / (e^2 + e) ≈ 0.731.
        let hits = (0..n)
            .map(|_| sample_next(&logits, 1.0, 0, 0.7, &mut rng))
            .inspect(|&i| assert!(matches!(i, 1 | 2), "{i}"))
            .filter(|&i| i == 1)
            .count();
        let p = (2f64).exp() / ((2f64).exp() + 1f64.exp());
        assert!((hits as f64 / n as f64 - p).abs() < 0.04, "{hits}");
        // Top-p small enough keeps the most likely token only.
        assert!((0..50).all(|_| sample_next(&logits, 1.0, 0, 0.1, &mut rng) == 1));
    }
}
