//! The §6 theory measures on synthetic inputs with known answers: Gaussian rows under a Haar
//! projection (mean squared norm ratio `d_k/d_model`), a square rotation (an isometry), the
//! JL `ε` equation, and the exact Gaussian correlation of `q·k` with `x·y` for tied
//! (`sqrt(d_k/d_model)`) and independent projections.

use orthoformer::analysis::theory::plot::{Series, write_scatter};
use orthoformer::analysis::theory::{
    Matrix, distance_distortion, gaussian_qk_correlation, jl_epsilon, norm_ratio, qk_correlation,
};
use orthoformer::init::orthogonal::haar_f64;
use orthoformer::init::rng::{fill_standard_normal, seeded};

fn gaussian(rows: usize, cols: usize, seed: u64) -> Matrix {
    let mut data = vec![0.0; rows * cols];
    fill_standard_normal(&mut seeded(seed), &mut data);
    Matrix::new(rows, cols, data).unwrap()
}

fn haar(d: usize, k: usize, seed: u64) -> Matrix {
    Matrix::new(d, k, haar_f64(d, k, 1.0, seed).unwrap()).unwrap()
}

/// `||xW||²/||x||² ~ Beta(k/2, (d-k)/2)`: mean `k/d = 0.25`, sd `0.0754`; 4,000 rows put the
/// sample mean within 0.006 (5 standard errors), and the sd within 10%.
#[test]
fn gaussian_rows_shrink_by_sqrt_dk_over_dmodel() {
    let (d, k) = (64, 16);
    let r = norm_ratio(&gaussian(4000, d, 1), &haar(d, k, 2)).unwrap();
    assert_eq!(r.count, 4000);
    assert!(
        (r.mean_sq - 0.25).abs() < 0.006,
        "mean square ratio {}",
        r.mean_sq
    );
    assert!((r.predicted - 0.5).abs() < 1e-15);
    let sq: Vec<f64> = r.ratios.iter().map(|x| x * x).collect();
    let m = sq.iter().sum::<f64>() / sq.len() as f64;
    let sd = (sq.iter().map(|x| (x - m).powi(2)).sum::<f64>() / sq.len() as f64).sqrt();
    let beta_sd = (8.0f64 * 24.0 / (32.0 * 32.0 * 33.0)).sqrt();
    assert!(
        (sd / beta_sd - 1.0).abs() < 0.1,
        "sd {sd} vs Beta's {beta_sd}"
    );
    assert!(r.max < 1.0 && r.min > 0.0, "a projection never lengthens");
}

#[test]
fn a_square_rotation_is_an_isometry() {
    let x = gaussian(50, 32, 3);
    let w = haar(32, 32, 4);
    let r = norm_ratio(&x, &w).unwrap();
    assert!((r.min - 1.0).abs() < 1e-12 && (r.max - 1.0).abs() < 1e-12);
    let dist = distance_distortion(&x, &w).unwrap();
    assert!(dist.max_distortion < 1e-12, "{}", dist.max_distortion);
    assert_eq!(dist.pairs, 50 * 49 / 2);
}

#[test]
fn jl_epsilon_solves_the_dasgupta_gupta_bound() {
    let e = jl_epsilon(100, 256).unwrap();
    let lhs = e * e / 2.0 - e * e * e / 3.0;
    assert!((lhs - 4.0 * 100f64.ln() / 256.0).abs() < 1e-12);
    assert!(
        jl_epsilon(100, 512).unwrap() < e,
        "more dimensions, smaller epsilon"
    );
    assert!(
        jl_epsilon(100, 64).is_none(),
        "4 ln 100 / 64 > 1/6: JL guarantees nothing"
    );
    assert!(jl_epsilon(1, 64).is_none());
}

/// Gaussian points under a rescaled random projection stay inside the JL guarantee, and the
/// unscaled ratio is about `sqrt(k/d)`.
#[test]
fn distortion_of_random_points_is_within_jl() {
    let (d, k) = (512, 256);
    let dist = distance_distortion(&gaussian(40, d, 5), &haar(d, k, 6)).unwrap();
    let eps = dist.jl_epsilon.unwrap();
    assert!(
        dist.max_distortion < eps,
        "{} >= {eps}",
        dist.max_distortion
    );
    assert!(dist.max_distortion > 0.0);
    assert!(
        (dist.mean_scaled_sq - 1.0).abs() < 0.02,
        "{}",
        dist.mean_scaled_sq
    );
    assert!((dist.mean_unscaled - (0.5f64).sqrt()).abs() < 0.02);
}

/// Tied `W_Q = W_K`: `q·k = (xW)·(yW)` and the correlation with `x·y` is `sqrt(k/d)` for
/// Gaussian inputs; with `k = d` it is exactly 1. Independent projections: near 0, and the
/// measured value matches the exact Gaussian formula for the same matrices.
#[test]
fn qk_correlation_matches_the_gaussian_formula() {
    let (d, k) = (64, 16);
    let x = gaussian(500, d, 7);
    let w = haar(d, k, 8);
    let tied = qk_correlation(&x, &w, &w).unwrap();
    assert_eq!(tied.pairs, 500 * 499 / 2);
    assert!((tied.gaussian_prediction - 0.5).abs() < 1e-12);
    assert!((tied.pearson - 0.5).abs() < 0.03, "tied {}", tied.pearson);
    let full = haar(d, d, 9);
    let exact = qk_correlation(&x, &full, &full).unwrap();
    assert!((exact.pearson - 1.0).abs() < 1e-12);
    let indep = qk_correlation(&x, &w, &haar(d, k, 10)).unwrap();
    assert!(
        indep.gaussian_prediction.abs() < 0.15,
        "{}",
        indep.gaussian_prediction
    );
    assert!(
        (indep.pearson - indep.gaussian_prediction).abs() < 0.03,
        "independent {} vs formula {}",
        indep.pearson,
        indep.gaussian_prediction
    );
    let wk = haar(d, k, 11);
    let p = gaussian_qk_correlation(&w, &wk).unwrap();
    assert_eq!(p, gaussian_qk_correlation(&w, &wk).unwrap());
}

#[test]
fn shape_errors_are_reported() {
    assert!(Matrix::new(2, 3, vec![0.0; 5]).is_err());
    let x = gaussian(4, 8, 1);
    assert!(norm_ratio(&x, &haar(6, 2, 1)).is_err());
    assert!(qk_correlation(&x, &haar(8, 2, 1), &haar(8, 3, 2)).is_err());
    assert!(x.columns(6, 4).is_err());
    assert_eq!(x.columns(2, 3).unwrap().row(1), &x.row(1)[2..5]);
}

#[test]
fn scatter_plot_is_written() {
    let dir = std::env::temp_dir().join(format!("theory-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x = gaussian(60, 16, 1);
    let w = haar(16, 4, 2);
    let tied = qk_correlation(&x, &w, &w).unwrap();
    let series = [Series {
        label: "tied".into(),
        points: tied.sample,
    }];
    let (png, svg) = (dir.join("s.png"), dir.join("s.svg"));
    write_scatter(&series, "q·k vs x·y", &png, &svg).unwrap();
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("tied"));
    std::fs::remove_dir_all(&dir).unwrap();
}
