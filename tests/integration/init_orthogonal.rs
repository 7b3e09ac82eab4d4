//! Orthogonal generation: orthonormality over many shapes and gains, reproducibility, the Haar
//! law (KS of entries against the exact Beta law, binomial test of the determinant's sign),
//! and a check that the sign fix changes the law of QR.

use orthoformer::init::orthogonal::{
    OrthoMethod, haar_f64, ortho_error, orthogonal_f32, orthogonal_f64, qr_without_sign_fix,
};
use orthoformer::stats::{beta_cdf, ks_test};

const SHAPES: [(usize, usize); 11] = [
    (1, 1),
    (1, 7),
    (7, 1),
    (2, 2),
    (5, 5),
    (9, 4),
    (4, 9),
    (64, 64),
    (100, 30),
    (30, 100),
    (768, 64),
];

#[test]
fn orthonormal_for_every_method_shape_and_gain() {
    for method in OrthoMethod::ALL {
        for &(m, n) in &SHAPES {
            for gain in [0.0f64, 0.5, 1.0, 2.0] {
                let size = m.max(n) as f64;
                let scale = gain.max(1.0) * gain.max(1.0);
                let w = orthogonal_f64(m, n, method, gain, 7).unwrap();
                assert_eq!(w.len(), m * n);
                let e = ortho_error(&w, m, n, gain);
                assert!(
                    e < 1e-12 * size * scale,
                    "{method:?} {m}x{n} gain {gain}: f64 error {e}"
                );
                let w32 = orthogonal_f32(m, n, method, gain, 7).unwrap();
                let e = ortho_error(&w32, m, n, gain);
                assert!(
                    e < 1e-5 * size * scale,
                    "{method:?} {m}x{n} gain {gain}: f32 error {e}"
                );
            }
        }
    }
}

#[test]
fn large_square_is_orthogonal() {
    for method in [OrthoMethod::Qr, OrthoMethod::Householder] {
        let w = orthogonal_f64(1024, 1024, method, 1.0, 1).unwrap();
        let e = ortho_error(&w, 1024, 1024, 1.0);
        assert!(e < 1e-12 * 1024.0, "{method:?}: {e}");
    }
}

#[test]
fn ortho_error_sees_a_non_orthogonal_matrix() {
    let mut w = orthogonal_f64(6, 3, OrthoMethod::Qr, 1.0, 0).unwrap();
    w[0] += 1e-3;
    assert!(ortho_error(&w, 6, 3, 1.0) > 1e-4);
    // Wrong gain is an error too.
    let w = orthogonal_f64(6, 3, OrthoMethod::Qr, 2.0, 0).unwrap();
    assert!((ortho_error(&w, 6, 3, 1.0) - 3.0 * 3f64.sqrt()).abs() < 1e-9);
}

#[test]
fn bad_arguments_are_errors() {
    for method in OrthoMethod::ALL {
        assert!(orthogonal_f64(0, 3, method, 1.0, 0).is_err());
        assert!(orthogonal_f64(3, 0, method, 1.0, 0).is_err());
        for g in [f64::NAN, f64::INFINITY, -1.0] {
            let e = orthogonal_f64(3, 3, method, g, 0).unwrap_err().to_string();
            assert!(e.contains("gain"), "{e}");
        }
    }
}

#[test]
fn reproducible_bit_for_bit_and_seed_sensitive() {
    for method in OrthoMethod::ALL {
        let a = orthogonal_f64(40, 12, method, 1.0, 99).unwrap();
        let b = orthogonal_f64(40, 12, method, 1.0, 99).unwrap();
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        let c = orthogonal_f64(40, 12, method, 1.0, 100).unwrap();
        assert!(
            a.iter().zip(&c).any(|(x, y)| x != y),
            "{method:?}: seed ignored"
        );
        // Same bits inside a 2-thread rayon pool and a 1-thread one.
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let d = pool.install(|| orthogonal_f64(300, 300, method, 1.0, 5).unwrap());
            let e = orthogonal_f64(300, 300, method, 1.0, 5).unwrap();
            assert!(d.iter().zip(&e).all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
    // haar_f64 is the qr method.
    assert_eq!(
        haar_f64(8, 3, 1.5, 4).unwrap(),
        orthogonal_f64(8, 3, OrthoMethod::Qr, 1.5, 4).unwrap()
    );
}

/// Entry (i, j) of `count` independent `rows x cols` matrices.
fn entries(
    make: impl Fn(u64) -> Vec<f64>,
    cols: usize,
    i: usize,
    j: usize,
    count: u64,
) -> Vec<f64> {
    (0..count).map(|s| make(1000 + s)[i * cols + j]).collect()
}

/// KS p-value of entries against the exact law: `(x + 1) / 2 ~ Beta((m-1)/2, (m-1)/2)` for
/// any entry of a Haar matrix whose long side is `m`.
fn haar_entry_pvalue(xs: &[f64], m: usize) -> f64 {
    let a = (m as f64 - 1.0) / 2.0;
    ks_test(xs, |x| beta_cdf(a, a, (x + 1.0) / 2.0))
}

#[test]
fn haar_methods_have_the_exact_entry_law() {
    for method in [OrthoMethod::Qr, OrthoMethod::Svd, OrthoMethod::Householder] {
        // Square, tall and wide; a diagonal, an off-diagonal and a last-column entry.
        for &(m, n, i, j) in &[(6, 6, 0, 0), (6, 6, 5, 5), (8, 3, 2, 1), (3, 8, 2, 7)] {
            let xs = entries(
                |s| orthogonal_f64(m, n, method, 1.0, s).unwrap(),
                n,
                i,
                j,
                2000,
            );
            let p = haar_entry_pvalue(&xs, m.max(n));
            assert!(p > 1e-4, "{method:?} {m}x{n} entry ({i},{j}): KS p = {p}");
        }
    }
}

#[test]
fn the_sign_fix_matters() {
    // Without the fix, LAPACK's convention makes the first diagonal entry always negative:
    // the KS test must reject the Haar law with overwhelming evidence.
    let xs = entries(|s| qr_without_sign_fix(6, s), 6, 0, 0, 2000);
    let p = haar_entry_pvalue(&xs, 6);
    assert!(p < 1e-12, "unfixed QR passed as Haar: p = {p}");
    let xs = entries(
        |s| orthogonal_f64(6, 6, OrthoMethod::Qr, 1.0, s).unwrap(),
        6,
        0,
        0,
        2000,
    );
    assert!(haar_entry_pvalue(&xs, 6) > 1e-4);
}

/// The sign of the determinant of a row-major `n x n` matrix (Gaussian elimination with
/// partial pivoting).
fn det_sign(mut a: Vec<f64>, n: usize) -> f64 {
    let mut sign = 1.0;
    for k in 0..n {
        let p = (k..n)
            .max_by(|&x, &y| a[x * n + k].abs().total_cmp(&a[y * n + k].abs()))
            .unwrap();
        if p != k {
            for c in 0..n {
                a.swap(k * n + c, p * n + c);
            }
            sign = -sign;
        }
        let piv = a[k * n + k];
        if piv < 0.0 {
            sign = -sign;
        }
        for r in k + 1..n {
            let f = a[r * n + k] / piv;
            for c in k..n {
                a[r * n + c] -= f * a[k * n + c];
            }
        }
    }
    sign
}

#[test]
fn determinant_signs_are_balanced_for_haar_and_fixed_for_cayley() {
    let trials = 2000u64;
    for method in [OrthoMethod::Qr, OrthoMethod::Svd, OrthoMethod::Householder] {
        for n in [1, 2, 5] {
            let plus = (0..trials)
                .filter(|&s| det_sign(orthogonal_f64(n, n, method, 1.0, s).unwrap(), n) > 0.0)
                .count() as f64;
            // Binomial(2000, 1/2): |z| < 4.9 has two-sided p > 1e-6.
            let z = (plus - trials as f64 / 2.0) / (trials as f64 / 4.0).sqrt();
            assert!(
                z.abs() < 4.9,
                "{method:?} n={n}: {plus} of {trials} have det +1 (z = {z})"
            );
        }
    }
    // The Cayley transform only reaches SO(n): det is always +1 (so it cannot be Haar on O(n)).
    for s in 0..50 {
        assert_eq!(
            det_sign(
                orthogonal_f64(5, 5, OrthoMethod::Cayley, 1.0, s).unwrap(),
                5
            ),
            1.0
        );
    }
}

#[test]
fn method_names_round_trip() {
    for m in OrthoMethod::ALL {
        assert_eq!(OrthoMethod::from_name(m.name()), Some(m));
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, format!("\"{}\"", m.name()));
    }
    assert!(!OrthoMethod::Cayley.is_haar());
    assert!(OrthoMethod::Qr.is_haar());
}
