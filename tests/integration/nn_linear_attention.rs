//! Linear attention: causal prefix-sum form and the seed's non-causal form equal the
//! quadratic reference (rel err 1e-5), the causal backward equals finite differences of the
//! reference, and extreme inputs stay finite.

use orthoformer::nn::linear_attention::*;

fn data(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            scale * ((i as f32 * 0.731 + seed as f32 * 1.37).sin() + 0.3 * (i as f32 * 0.173).cos())
        })
        .collect()
}

fn max_rel(a: &[f32], b: &[f32]) -> f32 {
    let s = b.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
        / s
}

#[test]
fn causal_and_noncausal_equal_quadratic_reference() {
    let (bh, t, d) = (3, 17, 5);
    let mut q = vec![0.0; bh * t * d];
    let mut k = q.clone();
    feature_map(&mut q, &data(bh * t * d, 1, 2.0));
    feature_map(&mut k, &data(bh * t * d, 2, 2.0));
    let v = data(bh * t * d, 3, 1.0);
    let mut o = vec![0.0; bh * t * d];
    let mut den = vec![0.0; bh * t];
    let mut scratch = vec![0.0; bh * scratch_per_head(t, d)];
    causal_forward(&mut o, &mut den, &q, &k, &v, &mut scratch, t, d);
    for h in 0..bh {
        let r = h * t * d..(h + 1) * t * d;
        let mut want = vec![0.0; t * d];
        quadratic_reference(
            &mut want,
            &q[r.clone()],
            &k[r.clone()],
            &v[r.clone()],
            t,
            d,
            true,
        );
        let e = max_rel(&o[r.clone()], &want);
        assert!(e < 1e-5, "causal head {h}: rel err {e}");
        let mut nc = vec![0.0; t * d];
        noncausal_forward(&mut nc, &q[r.clone()], &k[r.clone()], &v[r.clone()], t, d);
        quadratic_reference(&mut want, &q[r.clone()], &k[r.clone()], &v[r], t, d, false);
        let e = max_rel(&nc, &want);
        assert!(e < 1e-5, "non-causal head {h}: rel err {e}");
    }
}

#[test]
fn causal_backward_matches_finite_differences() {
    let (t, d) = (7, 3);
    let mut q = vec![0.0; t * d];
    let mut k = q.clone();
    feature_map(&mut q, &data(t * d, 4, 1.0));
    feature_map(&mut k, &data(t * d, 5, 1.0));
    let v = data(t * d, 6, 1.0);
    let w = data(t * d, 7, 1.0); // loss = Σ w ⊙ O
    let loss = |q: &[f32], k: &[f32], v: &[f32]| -> f64 {
        let mut o = vec![0.0; t * d];
        quadratic_reference(&mut o, q, k, v, t, d, true);
        o.iter()
            .zip(&w)
            .map(|(a, b)| (*a as f64) * (*b as f64))
            .sum()
    };
    let mut o = vec![0.0; t * d];
    let mut den = vec![0.0; t];
    let mut scratch = vec![0.0; scratch_per_head(t, d)];
    causal_forward(&mut o, &mut den, &q, &k, &v, &mut scratch, t, d);
    let (mut dq, mut dk, mut dv) = (vec![0.0; t * d], vec![0.0; t * d], vec![0.0; t * d]);
    causal_backward(
        &mut dq,
        &mut dk,
        &mut dv,
        &den,
        &mut scratch,
        &w,
        &q,
        &k,
        &v,
        t,
        d,
    );
    let h = 1e-3f32;
    for (name, which, g) in [("q", 0, &dq), ("k", 1, &dk), ("v", 2, &dv)] {
        for i in 0..t * d {
            let mut xs = [q.clone(), k.clone(), v.clone()];
            xs[which][i] += h;
            let lp = loss(&xs[0], &xs[1], &xs[2]);
            xs[which][i] -= 2.0 * h;
            let lm = loss(&xs[0], &xs[1], &xs[2]);
            let fd = ((lp - lm) / (2.0 * h as f64)) as f32;
            assert!(
                (fd - g[i]).abs() < 2e-3 * (1.0 + fd.abs()),
                "d{name}[{i}]: fd {fd} vs {}",
                g[i]
            );
        }
    }
}

#[test]
fn extreme_inputs_stay_finite() {
    let (t, d) = (9, 4);
    let mut q = vec![0.0; t * d];
    let mut k = vec![0.0; t * d];
    feature_map(&mut q, &vec![-200.0; t * d]); // φ underflows to 0: the ε keeps 0/0 away
    feature_map(&mut k, &data(t * d, 8, 50.0));
    let v = data(t * d, 9, 1.0);
    let mut o = vec![0.0; t * d];
    let mut den = vec![0.0; t];
    let mut scratch = vec![0.0; scratch_per_head(t, d)];
    causal_forward(&mut o, &mut den, &q, &k, &v, &mut scratch, t, d);
    assert!(o.iter().all(|x| x.is_finite()));
}
