//! The learned per-head temperature on attention scores (`Temperature::Learned`): head `h`'s
//! scores are `τ_h·q·k/√D`, computed by scaling the head's queries by `τ_h` before the
//! attention (the saved queries stay unscaled, so the backward pass needs no division).

/// `q` (`B·T` rows of `h` heads of width `d`) with head `i`'s columns scaled by `tau[i]`.
pub(crate) fn scaled(q: &[f32], tau: &[f32], d: usize) -> Vec<f32> {
    let c = tau.len() * d;
    let mut out = q.to_vec();
    for row in out.chunks_exact_mut(c) {
        for (head, &t) in row.chunks_exact_mut(d).zip(tau) {
            head.iter_mut().for_each(|x| *x *= t);
        }
    }
    out
}

/// Backward of [`scaled`]: from `dq` (the gradient of the scaled queries, in place) to the
/// gradient of the unscaled ones, accumulating `dtau[i] += Σ dq·q` over head `i`'s columns.
pub(crate) fn backward(dq: &mut [f32], dtau: &mut [f32], q: &[f32], tau: &[f32], d: usize) {
    let c = tau.len() * d;
    for (grow, row) in dq.chunks_exact_mut(c).zip(q.chunks_exact(c)) {
        for (((gh, qh), &t), dt) in grow
            .chunks_exact_mut(d)
            .zip(row.chunks_exact(d))
            .zip(tau)
            .zip(dtau.iter_mut())
        {
            let mut acc = 0.0f64;
            for (g, x) in gh.iter_mut().zip(qh) {
                acc += (*g * *x) as f64;
                *g *= t;
            }
            *dt += acc as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backward is the transpose of the forward: ⟨dq, scaled(q)⟩ splits into the two
    /// gradients, checked against a finite difference in τ.
    #[test]
    fn backward_matches_finite_differences() {
        let (rows, h, d) = (3, 2, 4);
        let q: Vec<f32> = (0..rows * h * d).map(|i| (i as f32 * 0.7).cos()).collect();
        let g: Vec<f32> = (0..rows * h * d).map(|i| (i as f32 * 0.3).sin()).collect();
        let tau = [1.3f32, 0.6];
        let f = |tau: &[f32]| -> f64 {
            let s = scaled(&q, tau, d);
            s.iter().zip(&g).map(|(a, b)| (*a * *b) as f64).sum()
        };
        let (mut dq, mut dtau) = (g.clone(), vec![0.0f32; h]);
        backward(&mut dq, &mut dtau, &q, &tau, d);
        for i in 0..h {
            let (mut up, mut down) = (tau, tau);
            up[i] += 1e-3;
            down[i] -= 1e-3;
            let num = (f(&up) - f(&down)) / 2e-3;
            assert!((num - dtau[i] as f64).abs() < 1e-3, "{num} vs {}", dtau[i]);
        }
        // d/dq of ⟨g, τ·q⟩ is τ·g.
        assert!((dq[0] - g[0] * tau[0]).abs() < 1e-7 && (dq[d] - g[d] * tau[1]).abs() < 1e-7);
    }
}
