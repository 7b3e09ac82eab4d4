//! Inverted dropout with counter-based masks: element `i` of site `site` is kept iff
//! `u(seed, site, i) >= p`, kept values scaled by `1/(1-p)`. The mask depends only on
//! `(seed, site, i)`, so it is reproducible bit for bit and independent of thread count.

use crate::init::rng::mix64 as mix;

/// The stream of masks of one site under one seed.
pub fn site_base(seed: u64, site: u64) -> u64 {
    mix(seed ^ mix(site))
}

/// Mask value of element `i` of the stream `base`: `0` with probability `p`, else `1/(1-p)`.
#[inline]
pub fn mask_at(base: u64, i: usize, p: f32) -> f32 {
    let u = (mix(base ^ i as u64) >> 40) as f32 / (1u64 << 24) as f32;
    if u >= p { 1.0 / (1.0 - p) } else { 0.0 }
}

/// Fills `mask` with `0` or `1/(1-p)` for site `site`, and multiplies `x` by it.
pub fn forward(x: &mut [f32], mask: &mut [f32], p: f32, seed: u64, site: u64) {
    let base = site_base(seed, site);
    for (i, (v, m)) in x.iter_mut().zip(mask.iter_mut()).enumerate() {
        *m = mask_at(base, i, p);
        *v *= *m;
    }
}

/// Backward: `dx *= mask`, in place.
pub fn backward(dx: &mut [f32], mask: &[f32]) {
    for (d, m) in dx.iter_mut().zip(mask) {
        *d *= m;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_about_one_minus_p_and_is_reproducible() {
        let n = 100_000;
        let mut x = vec![1.0f32; n];
        let mut m = vec![0.0f32; n];
        super::forward(&mut x, &mut m, 0.25, 7, 3);
        let kept = m.iter().filter(|&&v| v > 0.0).count() as f64;
        // Binomial(n, 0.75): sd = sqrt(n·0.75·0.25) ≈ 137; 5 sd bound.
        assert!((kept - 75_000.0).abs() < 700.0, "kept {kept}");
        let mut x2 = vec![1.0f32; n];
        let mut m2 = vec![0.0f32; n];
        super::forward(&mut x2, &mut m2, 0.25, 7, 3);
        assert_eq!(m, m2);
        super::forward(&mut x2, &mut m2, 0.25, 8, 3);
        assert_ne!(m, m2);
    }
}
