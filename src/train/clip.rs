//! Global-norm gradient clipping, as `torch.nn.utils.clip_grad_norm_`: with
//! `‖g‖ = sqrt(Σ g²)` over every trainable gradient, scale all of them by
//! `max_norm / (‖g‖ + 1e-6)` when that is below 1. The norm is accumulated in f64.

/// Clips `grads` in place to global norm `max_norm` (0 or less: no clipping) and returns
/// the norm before clipping.
pub fn clip_grad_norm(grads: &mut [f32], max_norm: f64) -> f64 {
    let norm = grads
        .iter()
        .map(|&g| (g as f64) * (g as f64))
        .sum::<f64>()
        .sqrt();
    if max_norm > 0.0 && norm.is_finite() {
        let coef = max_norm / (norm + 1e-6);
        if coef < 1.0 {
            let c = coef as f32;
            grads.iter_mut().for_each(|g| *g *= c);
        }
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_only_above_the_threshold() {
        let mut g = vec![3.0, 4.0];
        assert_eq!(clip_grad_norm(&mut g, 10.0), 5.0);
        assert_eq!(g, vec![3.0, 4.0]);
        assert_eq!(clip_grad_norm(&mut g, 1.0), 5.0);
        let n: f32 = g.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((n - 1.0).abs() < 1e-6, "{n}");
        let mut h = vec![f32::NAN, 1.0];
        assert!(clip_grad_norm(&mut h, 1.0).is_nan());
    }
}
