//! Hadamard matrices: the fast transform equals the dense product, every factorisation is a
//! true Hadamard matrix, randomised Hadamard and Haar rotations are orthogonal, and sizes with
//! no known Hadamard matrix are a clear error.

use orthoformer::rotate::Rotation;
use orthoformer::rotate::hadamard::{apply_row, dense_factor, factors, kron, paley};

fn dense_hadamard(n: usize) -> Vec<f64> {
    let fs = factors(n).unwrap();
    let mut h = vec![1.0];
    let mut m = 1;
    for f in &fs {
        h = kron(&h, m, &dense_factor(f), f.order());
        m *= f.order();
    }
    assert_eq!(m, n);
    h
}

#[test]
fn paley_matrices_are_hadamard() {
    for q in [11, 19, 23, 43, 47] {
        let n = q + 1;
        let h = paley(q).unwrap();
        for i in 0..n {
            for j in 0..n {
                let d: f64 = (0..n).map(|k| h[i * n + k] * h[j * n + k]).sum();
                assert_eq!(d, if i == j { n as f64 } else { 0.0 }, "q={q} ({i},{j})");
            }
        }
    }
    assert!(paley(13).is_none(), "13 = 1 mod 4 has no Paley I matrix");
}

#[test]
fn fast_transform_equals_dense_product() {
    for n in [1, 2, 8, 12, 20, 48, 64, 96, 576, 1536] {
        let h = dense_hadamard(n);
        // H·Hᵀ = n·I.
        for i in (0..n).step_by(n / 4 + 1) {
            for j in 0..n {
                let d: f64 = (0..n).map(|k| h[i * n + k] * h[j * n + k]).sum();
                assert_eq!(d, if i == j { n as f64 } else { 0.0 });
            }
        }
        let x: Vec<f64> = (0..n)
            .map(|i| ((i * 7919 % 101) as f64 - 50.0) / 13.0)
            .collect();
        let want: Vec<f64> = (0..n)
            .map(|j| (0..n).map(|i| x[i] * h[i * n + j]).sum())
            .collect();
        let mut got = x.clone();
        let mut scratch = vec![0.0; n];
        apply_row(&mut got, &factors(n).unwrap(), &mut scratch);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-9 * n as f64, "n={n}: {g} vs {w}");
        }
    }
}

#[test]
fn factorises_576_with_order_12() {
    let fs = factors(576).unwrap();
    let orders: Vec<usize> = fs.iter().map(|f| f.order()).collect();
    assert_eq!(orders, [12, 12, 4]);
}

#[test]
fn unsupported_orders_are_errors() {
    for n in [3, 6, 10, 18, 0] {
        assert!(factors(n).is_none(), "{n}");
    }
    let e = Rotation::hadamard(10, 0).unwrap_err().to_string();
    assert!(
        e.contains("order 10") && e.contains("set `rotation` to random"),
        "{e}"
    );
}

fn assert_orthogonal(q: &[f64], n: usize) {
    for i in 0..n {
        for j in 0..n {
            let d: f64 = (0..n).map(|k| q[i * n + k] * q[j * n + k]).sum();
            let want = if i == j { 1.0 } else { 0.0 };
            assert!((d - want).abs() < 1e-12, "({i},{j}) {d}");
        }
    }
}

#[test]
fn rotations_are_orthogonal_and_reproducible() {
    for n in [12, 64, 96] {
        let h = Rotation::hadamard(n, 5).unwrap();
        assert_orthogonal(&h.dense(), n);
        let r = Rotation::random(n, 5).unwrap();
        assert_orthogonal(&r.dense(), n);
        assert_eq!(r.dense(), Rotation::random(n, 5).unwrap().dense());
        assert_eq!(h.dense(), Rotation::hadamard(n, 5).unwrap().dense());
        assert_ne!(h.dense(), Rotation::hadamard(n, 6).unwrap().dense());
    }
}

#[test]
fn hadamard_signs_are_fair_coin_flips() {
    // Binomial(4096, 1/2): mean 2048, sd 32; 4 sd bounds, for several seeds.
    for seed in 0..4 {
        let Rotation::Hadamard { signs, .. } = Rotation::hadamard(4096, seed).unwrap() else {
            panic!("not a Hadamard rotation")
        };
        let plus = signs.iter().filter(|&&s| s == 1.0).count() as f64;
        assert!(signs.iter().all(|&s| s == 1.0 || s == -1.0));
        assert!(
            (plus - 2048.0).abs() < 4.0 * 32.0,
            "seed {seed}: {plus} of 4096"
        );
        // Neighbouring signs agree about half the time (no runs).
        let same = signs.windows(2).filter(|w| w[0] == w[1]).count() as f64;
        assert!((same - 2047.5).abs() < 4.0 * 32.0, "seed {seed}: {same}");
    }
}
