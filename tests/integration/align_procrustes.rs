//! Orthogonal Procrustes recovers a known rotation from (noisy) rotated data, and reports a
//! large residual when the two spaces are unrelated.

use orthoformer::init::rng::{fill_standard_normal, seeded};
use orthoformer::rotate::Rotation;
use orthoformer::rotate::procrustes::procrustes;

fn data(n: usize, c: usize, seed: u64) -> Vec<f32> {
    let mut x = vec![0.0f64; n * c];
    fill_standard_normal(&mut seeded(seed), &mut x);
    // Anisotropic columns, like real hidden states (one outlier channel).
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            (v * if i % c == 3 {
                20.0
            } else {
                1.0 + (i % c) as f64 / c as f64
            }) as f32
        })
        .collect()
}

fn rotate(a: &[f32], q: &[f64], c: usize) -> Vec<f32> {
    a.chunks_exact(c)
        .flat_map(|r| {
            (0..c).map(move |j| (0..c).map(|i| r[i] as f64 * q[i * c + j]).sum::<f64>() as f32)
        })
        .collect()
}

#[test]
fn recovers_a_known_rotation() {
    let (n, c) = (400, 48);
    let a = data(n, c, 1);
    for r in [
        Rotation::random(c, 7).unwrap(),
        Rotation::hadamard(c, 7).unwrap(),
    ] {
        let q = r.dense();
        let b = rotate(&a, &q, c);
        let fit = procrustes(&a, &b, c).unwrap();
        let dist = (fit
            .r
            .iter()
            .zip(&q)
            .map(|(x, y)| (x - y).powi(2))
            .sum::<f64>()
            / c as f64)
            .sqrt();
        assert!(dist < 1e-5, "distance to Q {dist}");
        assert!(fit.relative_residual < 1e-6, "{}", fit.relative_residual);
        assert!(fit.identity_residual > 0.5);
        // With noise the map is still close.
        let mut noise = vec![0.0f64; n * c];
        fill_standard_normal(&mut seeded(9), &mut noise);
        let bn: Vec<f32> = b
            .iter()
            .zip(&noise)
            .map(|(x, e)| x + 0.01 * *e as f32)
            .collect();
        let fit = procrustes(&a, &bn, c).unwrap();
        let dist = (fit
            .r
            .iter()
            .zip(&q)
            .map(|(x, y)| (x - y).powi(2))
            .sum::<f64>()
            / c as f64)
            .sqrt();
        assert!(dist < 1e-2, "noisy distance {dist}");
    }
}

#[test]
fn unrelated_spaces_leave_a_large_residual_and_bad_shapes_are_errors() {
    let c = 16;
    let fit = procrustes(&data(300, c, 1), &data(300, c, 2), c).unwrap();
    assert!(fit.relative_residual > 0.9, "{}", fit.relative_residual);
    // R is orthogonal even then.
    for i in 0..c {
        let d: f64 = (0..c).map(|k| fit.r[i * c + k].powi(2)).sum();
        assert!((d - 1.0).abs() < 1e-10);
    }
    assert!(procrustes(&[1.0; 10], &[1.0; 12], 2).is_err());
    assert!(procrustes(&[], &[], 4).is_err());
}
