//! Round-to-nearest quantisation and the activation statistics: levels, error bound, grouping,
//! kurtosis of known distributions, and why rotation helps (a Hadamard rotation spreads an
//! outlier channel, lowering kurtosis and 4-bit error).

use orthoformer::init::rng::{fill_standard_normal, seeded};
use orthoformer::model::llama::tap::LinearSite;
use orthoformer::quant::act_stats::ActStats;
use orthoformer::quant::simulated::{quantize_group, quantize_rows, quantize_weight};
use orthoformer::rotate::Rotation;

#[test]
fn rtn_uses_at_most_2b_minus_1_levels_and_half_a_step_of_error() {
    let mut x = vec![0.0f64; 1000];
    fill_standard_normal(&mut seeded(1), &mut x);
    let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    for bits in [4u32, 8] {
        let mut q = x.clone();
        quantize_group(&mut q, bits);
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let step = amax / ((1 << (bits - 1)) - 1) as f32;
        let mut levels: Vec<i64> = q.iter().map(|v| (v / step).round() as i64).collect();
        levels.sort();
        levels.dedup();
        assert!(
            levels.len() < (1 << bits),
            "{bits} bits: {} levels",
            levels.len()
        );
        for (a, b) in x.iter().zip(&q) {
            assert!((a - b).abs() <= step / 2.0 * 1.0001);
        }
    }
    // Zero rows stay zero; per-row scales are independent.
    let mut rows = vec![0.0, 0.0, 1.0, 100.0];
    quantize_rows(&mut rows, 2, 4);
    assert_eq!(rows, [0.0, 0.0, 0.0, 100.0]);
    let mut w = vec![0.1, 0.2, 50.0, 0.3];
    quantize_weight(&mut w, 4, 4, 2);
    assert!((w[0] - 0.1).abs() < 0.02 && (w[1] - 0.2).abs() < 1e-6);
}

#[test]
fn kurtosis_of_known_distributions_and_rotation_spreads_outliers() {
    let c = 576;
    let mut g = vec![0.0f64; c * 200];
    fill_standard_normal(&mut seeded(2), &mut g);
    let gauss: Vec<f32> = g.iter().map(|&v| v as f32).collect();
    let mut s = ActStats::default();
    s.record(LinearSite::OIn, &gauss, c);
    assert!(
        (s.o_in.mean_kurtosis - 3.0).abs() < 0.1,
        "{}",
        s.o_in.mean_kurtosis
    );
    assert_eq!(s.o_in.tokens, 200);

    // Gaussian plus one huge channel, like a real residual stream.
    let outl: Vec<f32> = gauss
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % c == 7 { 60.0 } else { v })
        .collect();
    let mut s = ActStats::default();
    s.record(LinearSite::DownIn, &outl, c);
    let k_before = s.down_in.mean_kurtosis;
    assert!(k_before > 100.0, "{k_before}");
    let mut rot: Vec<f64> = outl.iter().map(|&v| v as f64).collect();
    Rotation::hadamard(c, 0).unwrap().apply_rows(&mut rot);
    let rot: Vec<f32> = rot.iter().map(|&v| v as f32).collect();
    let mut s = ActStats::default();
    s.record(LinearSite::DownIn, &rot, c);
    assert!(s.down_in.mean_kurtosis < 4.0, "{}", s.down_in.mean_kurtosis);

    // 4-bit per-token error relative to the signal, before and after rotation.
    let err = |x: &[f32]| {
        let mut q = x.to_vec();
        quantize_rows(&mut q, c, 4);
        let e: f64 = x
            .iter()
            .zip(&q)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum();
        e / x.iter().map(|&a| (a as f64).powi(2)).sum::<f64>()
    };
    assert!(
        err(&rot) < 0.5 * err(&outl),
        "{} vs {}",
        err(&rot),
        err(&outl)
    );

    // Shared-input sites are counted once per call group (q then k, v).
    let mut s = ActStats::default();
    for _ in 0..3 {
        s.record(LinearSite::AttnIn, &gauss[..c], c);
    }
    assert_eq!(s.attn_in.tokens, 1);
}
