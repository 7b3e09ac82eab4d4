//! The quantised kernels against dequantise-then-f64: `matvec` (each SIMD body forced in turn
//! with `simd::with_isa`, and the parallel driver), `dequantize_rows` (bit-identical to the
//! GGUF reader's dequantisation), and `matmul_xwt` (panels + gemm, and the matvec path); and
//! the integer products with activations rounded to 8 bits (`matvec_rows_q8`) against the
//! same rounding done here, on every body.

use half::f16;
use orthoformer::io::gguf::GgmlType;
use orthoformer::nn::qmatmul::matmul_xwt;
use orthoformer::nn::qmatmul::matmul_xwt_many_with;
use orthoformer::nn::qmatvec::{
    MatvecInput, Q8Vector, QMatrix, dequantize, dequantize_rows, matvec, matvec_many,
    matvec_many_with, matvec_row_q8, matvec_rows, matvec_rows_q8, matvec4_row_q8,
};
use orthoformer::nn::simd::{available, with_isa};

/// A deterministic stream of pseudo-random u64 (SplitMix64).
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Random bytes of a `rows x cols` matrix of `ty` with sane scales.
fn random_matrix(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut r = Mix(seed);
    let mut out = Vec::new();
    let half = |v: f32| f16::from_f32(v).to_le_bytes();
    for _ in 0..rows {
        match ty {
            GgmlType::F32 => {
                for _ in 0..cols {
                    out.extend_from_slice(&r.uniform(-1.0, 1.0).to_le_bytes());
                }
            }
            GgmlType::F16 => {
                for _ in 0..cols {
                    out.extend_from_slice(&half(r.uniform(-2.0, 2.0)));
                }
            }
            GgmlType::BF16 => {
                for _ in 0..cols {
                    let b = r.uniform(-2.0, 2.0).to_bits();
                    out.extend_from_slice(&((b >> 16) as u16).to_le_bytes());
                }
            }
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
                // Any bytes are a valid super-block once its f16 scales are finite.
                let (per, bytes) = ty.block();
                for _ in 0..cols / per {
                    let mut b: Vec<u8> = (0..bytes).map(|_| r.next() as u8).collect();
                    let halves: &[usize] = if ty == GgmlType::Q6_K {
                        &[208]
                    } else {
                        &[0, 2]
                    };
                    for &at in halves {
                        b[at..at + 2].copy_from_slice(&half(r.uniform(-0.05, 0.05)));
                    }
                    out.extend_from_slice(&b);
                }
            }
            _ => {
                for _ in 0..cols / 32 {
                    out.extend_from_slice(&half(r.uniform(0.001, 0.1)));
                    if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                        out.extend_from_slice(&half(r.uniform(-0.5, 0.5)));
                    }
                    let quants = match ty {
                        GgmlType::Q8_0 => 32,
                        GgmlType::Q5_0 | GgmlType::Q5_1 => 20, // qh, then the nibbles
                        _ => 16,
                    };
                    for _ in 0..quants {
                        out.push(r.next() as u8);
                    }
                }
            }
        }
    }
    out
}

const TYPES: [GgmlType; 9] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// Column counts: odd and even block counts, and (for F32/F16) tails of every length.
fn widths(ty: GgmlType) -> Vec<usize> {
    match ty {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => vec![1, 7, 45, 64, 96, 577],
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => vec![256, 768, 1536],
        _ => vec![32, 96, 576, 1536],
    }
}

/// `W·x` in f64 from the dequantised weights, and `Σ|w·x|` per row (the error scale).
fn reference(w: &[f32], x: &[f32], cols: usize) -> Vec<(f64, f64)> {
    w.chunks(cols)
        .map(|row| {
            row.iter().zip(x).fold((0.0, 0.0), |(s, a), (&wv, &xv)| {
                let p = wv as f64 * xv as f64;
                (s + p, a + p.abs())
            })
        })
        .collect()
}

#[test]
fn matvec_matches_dequantised_product_on_every_body() {
    let rows = 37;
    for ty in TYPES {
        for cols in widths(ty) {
            let data = random_matrix(ty, rows, cols, cols as u64 * 31 + ty.id() as u64);
            let w = QMatrix::new(ty, rows, cols, &data).expect("valid matrix");
            let mut deq = vec![0.0f32; rows * cols];
            dequantize(ty, &data, &mut deq);
            let x: Vec<f32> = (0..cols)
                .map(|i| ((i * 7 % 23) as f32 - 11.0) * 0.09)
                .collect();
            let want = reference(&deq, &x, cols);
            for isa in available() {
                let mut y = vec![f32::NAN; rows];
                with_isa(isa, || matvec_rows(&mut y, w, &x));
                for (r, (&g, &(s, a))) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (g as f64 - s).abs() <= 1e-6 * a + 1e-30,
                        "{ty:?} {cols} cols, {isa:?}, row {r}: {g} vs {s}"
                    );
                }
                let mut d = vec![f32::NAN; rows * cols];
                with_isa(isa, || dequantize_rows(&mut d, w));
                assert!(
                    d.iter().zip(&deq).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{ty:?} {cols} cols, {isa:?}: dequantize_rows differs from dequantize"
                );
            }
            let mut y = vec![0.0f32; rows];
            let mut y1 = vec![0.0f32; rows];
            matvec(&mut y, w, &x);
            matvec_rows(&mut y1, w, &x);
            assert_eq!(y, y1, "{ty:?}: the parallel split changed a result");
        }
    }
}

#[test]
fn matvec_many_equals_separate_products() {
    let (a, b) = (
        random_matrix(GgmlType::Q4_1, 70, 96, 1),
        random_matrix(GgmlType::Q8_0, 19, 96, 2),
    );
    let wa = QMatrix::new(GgmlType::Q4_1, 70, 96, &a).unwrap();
    let wb = QMatrix::new(GgmlType::Q8_0, 19, 96, &b).unwrap();
    let x: Vec<f32> = (0..96).map(|i| (i as f32 * 0.37).sin()).collect();
    let (mut ya, mut yb) = (vec![0.0; 70], vec![0.0; 19]);
    matvec_many(&mut [(&mut ya, wa), (&mut yb, wb)], &x);
    let (mut ra, mut rb) = (vec![0.0; 70], vec![0.0; 19]);
    matvec(&mut ra, wa, &x);
    matvec(&mut rb, wb, &x);
    assert_eq!((ya, yb), (ra, rb));
}

#[test]
fn matmul_xwt_matches_dequantised_product() {
    // 150 weight rows: two full panels and a partial one.
    for ty in TYPES {
        let cols = if ty.block().0 == 256 { 256 } else { 96 };
        let rows = 150;
        let data = random_matrix(ty, rows, cols, 7 + ty.id() as u64);
        let w = QMatrix::new(ty, rows, cols, &data).unwrap();
        let mut deq = vec![0.0f32; rows * cols];
        dequantize(ty, &data, &mut deq);
        for n in [1, 2, 3, 17] {
            let x: Vec<f32> = (0..n * cols)
                .map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.05)
                .collect();
            let mut y = vec![f32::NAN; n * rows];
            matmul_xwt(&mut y, &x, n, w);
            for t in 0..n {
                let want = reference(&deq, &x[t * cols..(t + 1) * cols], cols);
                for (r, &(s, a)) in want.iter().enumerate() {
                    let g = y[t * rows + r] as f64;
                    assert!(
                        (g - s).abs() <= 1e-6 * a + 1e-30,
                        "{ty:?} N={n} row {t} col {r}: {g} vs {s}"
                    );
                }
            }
        }
    }
}

#[test]
fn bad_shapes_are_rejected() {
    let data = random_matrix(GgmlType::Q4_0, 2, 64, 3);
    assert!(QMatrix::new(GgmlType::Q4_0, 2, 64, &data).is_some());
    assert!(QMatrix::new(GgmlType::Q4_0, 3, 64, &data).is_none());
    assert!(QMatrix::new(GgmlType::Q4_0, 2, 48, &data[..54]).is_none());
    let f = [0.0f32; 9];
    let bytes: &[u8] = bytemuck::cast_slice(&f);
    assert!(
        QMatrix::new(GgmlType::F32, 2, 4, &bytes[1..33]).is_none(),
        "misaligned F32"
    );
    assert!(QMatrix::from_f32(&f, 3, 3).is_some());
}

/// `x` rounded as `Q8Vector` documents (`d = max|x|/127`, `q = round(x/d)` per 32), as f32.
fn rounded(x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut xr = Vec::with_capacity(x.len());
    let mut step = Vec::with_capacity(x.len());
    for b in x.chunks(32) {
        let d = b.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for &v in b {
            let q = (v * id).round();
            assert!(q.abs() <= 127.0);
            xr.push(d * q);
            step.push(d);
        }
    }
    (xr, step)
}

#[test]
fn q8_products_equal_the_rounded_input_product_on_every_body() {
    let rows = 37;
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        for cols in [32usize, 96, 256, 576, 1536] {
            if !cols.is_multiple_of(ty.block().0) {
                continue;
            }
            let data = random_matrix(ty, rows, cols, cols as u64 * 17 + ty.id() as u64);
            let w = QMatrix::new(ty, rows, cols, &data).expect("valid matrix");
            let mut deq = vec![0.0f32; rows * cols];
            dequantize(ty, &data, &mut deq);
            // Blocks of very different scales, a zero block and a block at ±127 exactly.
            let x: Vec<f32> = (0..cols)
                .map(|i| match i / 32 % 4 {
                    0 => ((i * 7 % 23) as f32 - 11.0) * 0.09,
                    1 => ((i * 5 % 19) as f32 - 9.0) * 3e-4,
                    2 => 0.0,
                    _ => {
                        if i % 2 == 0 {
                            2.54
                        } else {
                            -0.02
                        }
                    }
                })
                .collect();
            let (xr, step) = rounded(&x);
            let want = reference(&deq, &xr, cols);
            let exact = reference(&deq, &x, cols);
            let mut xq = Q8Vector::default();
            xq.quantize(&x);
            for isa in available() {
                let mut y = vec![f32::NAN; rows];
                with_isa(isa, || matvec_rows_q8(&mut y, w, &xq));
                for (r, &g) in y.iter().enumerate() {
                    let (s, a) = want[r];
                    assert!(
                        (g as f64 - s).abs() <= 1e-5 * a + 1e-30,
                        "{ty:?} {cols} cols, {isa:?}, row {r}: {g} vs {s}"
                    );
                    // Against the f32 input: at most half a rounding step per weight.
                    let row = &deq[r * cols..(r + 1) * cols];
                    let bound: f64 = row
                        .iter()
                        .zip(&step)
                        .map(|(&w, &d)| (w * d) as f64 / 2.0)
                        .map(f64::abs)
                        .sum();
                    assert!(
                        (g as f64 - exact[r].0).abs() <= bound + 1e-5 * exact[r].1,
                        "{ty:?} {cols} cols, {isa:?}, row {r}: {g} vs f32 input {}",
                        exact[r].0
                    );
                }
            }
        }
    }
}

/// Four rows of X against each weight block unpacked once give each row
/// exactly (bit for bit) what the one-row product gives it, on every body and type, so a
/// batch of decode steps equals the steps alone.
#[test]
fn q8_four_row_products_equal_the_one_row_products_bit_for_bit() {
    let rows = 21;
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        for cols in [32usize, 96, 256, 288, 576] {
            if !cols.is_multiple_of(ty.block().0) {
                continue;
            }
            let data = random_matrix(ty, rows, cols, cols as u64 * 5 + ty.id() as u64);
            let w = QMatrix::new(ty, rows, cols, &data).expect("valid matrix");
            let x: Vec<f32> = (0..4 * cols)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * (1.0 + (i / 32 % 3) as f32 * 10.0))
                .collect();
            let mut xq = Q8Vector::default();
            xq.quantize(&x);
            for isa in available() {
                let one: Vec<Vec<f32>> = (0..4)
                    .map(|j| {
                        let mut y = vec![f32::NAN; rows];
                        with_isa(isa, || matvec_row_q8(&mut y, w, xq.row(j, cols)));
                        y
                    })
                    .collect();
                let mut four = vec![vec![f32::NAN; rows]; 4];
                let [a, b, c, d] = &mut four[..] else {
                    unreachable!()
                };
                let xs = [0, 1, 2, 3].map(|j| xq.row(j, cols));
                with_isa(isa, || matvec4_row_q8([a, b, c, d], w, xs));
                let bits = |v: &[Vec<f32>]| -> Vec<u32> {
                    v.concat().iter().map(|x| x.to_bits()).collect()
                };
                assert_eq!(bits(&four), bits(&one), "{ty:?} {cols} cols, {isa:?}");
                assert!(one.concat().iter().all(|v| v.is_finite()));
            }
        }
    }
}

#[test]
fn matvec_many_with_q8_rounds_once_and_leaves_other_types_exact() {
    let (a, b) = (
        random_matrix(GgmlType::Q4_1, 70, 96, 1),
        random_matrix(GgmlType::F16, 19, 96, 2),
    );
    let wa = QMatrix::new(GgmlType::Q4_1, 70, 96, &a).unwrap();
    let wb = QMatrix::new(GgmlType::F16, 19, 96, &b).unwrap();
    let x: Vec<f32> = (0..96).map(|i| (i as f32 * 0.37).sin()).collect();
    let (mut ya, mut yb) = (vec![0.0; 70], vec![0.0; 19]);
    let mut scratch = Q8Vector::default();
    matvec_many_with(
        &mut [(&mut ya, wa), (&mut yb, wb)],
        &x,
        MatvecInput::Q8,
        &mut scratch,
    );
    let mut xq = Q8Vector::default();
    xq.quantize(&x);
    let (mut ra, mut rb) = (vec![0.0; 70], vec![0.0; 19]);
    matvec_rows_q8(&mut ra, wa, &xq);
    matvec(&mut rb, wb, &x);
    assert_eq!((&ya, &yb), (&ra, &rb));
    // One and two rows of a matrix product take the same path; three rows read f32.
    let x2: Vec<f32> = x.iter().chain(&x).copied().collect();
    let mut y2 = vec![0.0; 140];
    matmul_xwt_many_with(&mut [(&mut y2, wa)], &x2, 2, MatvecInput::Q8, &mut scratch);
    assert_eq!((&y2[..70], &y2[70..]), (&ra[..], &ra[..]));
    let mut f = vec![0.0; 70];
    matvec_many_with(&mut [(&mut f, wa)], &x, MatvecInput::F32, &mut scratch);
    let mut g = vec![0.0; 70];
    matvec(&mut g, wa, &x);
    assert_eq!(f, g);
    assert_ne!(f, ra, "the rounded input must change some result");
}

/// A prefill block with `dot` q8: each row of every integer-product weight equals that row's
/// matrix-vector product with the row rounded alone (the same kernel, so exactly), and a
/// weight without one (F16) equals its f32 product; panels of 64 rows and sub-panels of 16
/// with a ragged end (150 rows) and several jobs in one loop.
#[test]
fn q8_prefill_rounds_each_row_and_multiplies_panels_in_integers() {
    let (n, cols) = (5, 512);
    let types = [
        GgmlType::Q4_K,
        GgmlType::Q4_0,
        GgmlType::Q6_K,
        GgmlType::F16,
    ];
    let rows = [150, 64, 33, 40];
    let data: Vec<Vec<u8>> = types
        .iter()
        .zip(rows)
        .enumerate()
        .map(|(i, (&ty, r))| random_matrix(ty, r, cols, 40 + i as u64))
        .collect();
    let ws: Vec<QMatrix> = types
        .iter()
        .zip(rows)
        .zip(&data)
        .map(|((&ty, r), d)| QMatrix::new(ty, r, cols, d).unwrap())
        .collect();
    let x: Vec<f32> = (0..n * cols)
        .map(|i| (i as f32 * 0.61).sin() * 1.7)
        .collect();
    let mut ys: Vec<Vec<f32>> = rows.iter().map(|&r| vec![f32::NAN; n * r]).collect();
    let mut jobs: Vec<(&mut [f32], QMatrix)> = ys
        .iter_mut()
        .zip(&ws)
        .map(|(y, &w)| (y.as_mut_slice(), w))
        .collect();
    let mut scratch = Q8Vector::default();
    matmul_xwt_many_with(&mut jobs, &x, n, MatvecInput::Q8All, &mut scratch);
    for (j, (&w, y)) in ws.iter().zip(&ys).enumerate() {
        let r = w.rows();
        for i in 0..n {
            let xi = &x[i * cols..(i + 1) * cols];
            let mut want = vec![0.0f32; r];
            if j == 3 {
                matmul_xwt(&mut want, xi, 1, w);
                let got = &y[i * r..(i + 1) * r];
                for (a, b) in got.iter().zip(&want) {
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                        "F16 row {i}: {a} vs {b}"
                    );
                }
            } else {
                let mut xq = Q8Vector::default();
                xq.quantize(xi);
                matvec_rows_q8(&mut want, w, &xq);
                assert_eq!(&y[i * r..(i + 1) * r], &want[..], "{:?} row {i}", w.ty());
            }
        }
    }
}

#[test]
fn a_nan_activation_makes_q8_products_nan_as_f32_ones_are() {
    let data = random_matrix(GgmlType::Q4_1, 3, 64, 9);
    let w = QMatrix::new(GgmlType::Q4_1, 3, 64, &data).unwrap();
    let mut x: Vec<f32> = (0..64).map(|i| (i as f32 * 0.1).cos()).collect();
    x[40] = f32::NAN;
    let mut xq = Q8Vector::default();
    xq.quantize(&x);
    for isa in available() {
        let mut y = vec![0.0f32; 3];
        with_isa(isa, || matvec_rows_q8(&mut y, w, &xq));
        assert!(y.iter().all(|v| v.is_nan()), "{isa:?}: {y:?}");
    }
}

#[test]
fn matvec_input_names_round_trip() {
    for name in MatvecInput::NAMES {
        let v: MatvecInput = name.parse().unwrap();
        assert_eq!(v.name(), name);
    }
    let e = "q4".parse::<MatvecInput>().unwrap_err();
    assert!(e.contains("`dot`") && e.contains("f32, q8"), "{e}");
}
