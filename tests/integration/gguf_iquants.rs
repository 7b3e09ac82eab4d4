//! The non-linear 4-bit types IQ4_NL and IQ4_XS against llama.cpp's Python reference:
//! `tests/fixtures/gguf/iquants.gguf` (`scripts/iquant_fixture.py`) holds random tensors of
//! each type beside their dequantisation by the `gguf` package. The reader's dequantisation
//! and every SIMD body's `dequantize_rows` must give its bits exactly (0 ulp, signs of zero
//! included); `matvec` and the prefill product `matmul_xwt` must give its f64 product within
//! `1e-6·Σ|w·x|` (they differ only in the order of the sums).

use half::f16;
use orthoformer::io::gguf::{GgmlType, GgufFile};
use orthoformer::nn::qmatmul::matmul_xwt;
use orthoformer::nn::qmatvec::{
    MatvecInput, Q8Vector, QMatrix, dequantize, dequantize_rows, matvec, matvec_many_with,
    matvec_rows, q8_supports,
};
use orthoformer::nn::simd::{available, with_isa};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/gguf/iquants.gguf"
);

const TYPES: [(&str, GgmlType); 2] = [("iq4_nl", GgmlType::IQ4_NL), ("iq4_xs", GgmlType::IQ4_XS)];

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// `W·x` in f64 from the row-major `want`, and `Σ|w·x|` per row (the error scale).
fn reference(want: &[f32], x: &[f32], cols: usize) -> Vec<(f64, f64)> {
    want.chunks(cols)
        .map(|row| {
            row.iter().zip(x).fold((0.0, 0.0), |(s, a), (&w, &x)| {
                let p = f64::from(w) * f64::from(x);
                (s + p, a + p.abs())
            })
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[(f64, f64)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (r, (&g, &(s, a))) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - s).abs() <= 1e-6 * a + 1e-30,
            "{what} row {r}: {g} vs {s}"
        );
    }
}

/// `matvec_rows` and `dequantize_rows` on every body, the parallel `matvec`, and
/// `matmul_xwt` of a few rows, against the dequantised weights `want`.
fn check_kernels(w: QMatrix, want: &[f32], what: &str) {
    let (rows, cols) = (w.rows(), w.cols());
    let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 0.61).cos()).collect();
    let prods = reference(want, &x, cols);
    for isa in available() {
        let mut d = vec![f32::NAN; rows * cols];
        with_isa(isa, || dequantize_rows(&mut d, w));
        assert!(
            same_bits(&d, want),
            "{what} {isa:?}: dequantize_rows differs"
        );
        let mut y = vec![f32::NAN; rows];
        with_isa(isa, || matvec_rows(&mut y, w, &x));
        assert_close(&y, &prods, &format!("{what} {isa:?} matvec"));
        // Five rows of X: the panel (dequantise + gemm) path of prefill.
        let n = 5;
        let xs: Vec<f32> = (0..n * cols)
            .map(|i| ((i * 7 % 23) as f32 - 11.0) * 0.09)
            .collect();
        let mut ys = vec![f32::NAN; n * rows];
        with_isa(isa, || matmul_xwt(&mut ys, &xs, n, w));
        for (k, (yr, xr)) in ys.chunks(rows).zip(xs.chunks(cols)).enumerate() {
            let p = reference(want, xr, cols);
            assert_close(yr, &p, &format!("{what} {isa:?} matmul_xwt row {k} of X"));
        }
    }
    let mut y = vec![f32::NAN; rows];
    let mut y1 = vec![f32::NAN; rows];
    matvec(&mut y, w, &x);
    matvec_rows(&mut y1, w, &x);
    assert_eq!(y, y1, "{what}: the parallel split changed a result");
    // No integer product for these types: `dot = q8` reads f32, exactly as the f32 path.
    assert!(!q8_supports(w.ty()));
    let mut yq = vec![f32::NAN; rows];
    matvec_many_with(
        &mut [(&mut yq[..], w)],
        &x,
        MatvecInput::Q8,
        &mut Q8Vector::default(),
    );
    assert_eq!(yq, y, "{what}: q8 input changed an IQ4 product");
}

#[test]
fn iq4_types_match_the_gguf_package() {
    let g = GgufFile::open(std::path::Path::new(FIXTURE)).expect("fixture opens");
    let (rows, cols) = (2usize, 512usize);
    let dims = [cols as u64, rows as u64];
    for (name, ty) in TYPES {
        assert_eq!(g.tensor(name).unwrap().ty, ty);
        let want = g.tensor_f32(&format!("{name}.f32"), &dims).unwrap();
        // The fixture's first blocks have d = +0 and -0: their zeros carry signs.
        assert!(want.iter().any(|v| v.to_bits() == 0x8000_0000), "{name}");
        let got = g.tensor_f32(name, &dims).unwrap();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                a.to_bits() == b.to_bits(),
                "{name} weight {i}: {a} (crate) vs {b} (gguf package)"
            );
        }
        let (_, bytes) = g.tensor_bytes(name, &dims).unwrap();
        let w = QMatrix::new(ty, rows, cols, bytes.bytes()).expect("whole blocks");
        check_kernels(w, &want, name);
    }
}

/// SplitMix64.
fn mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn iq4_kernels_match_dequantisation_at_several_widths() {
    let rows = 37;
    for (name, ty, widths) in [
        ("iq4_nl", GgmlType::IQ4_NL, &[32usize, 96, 1536][..]),
        ("iq4_xs", GgmlType::IQ4_XS, &[256, 768][..]),
    ] {
        let (per, size) = ty.block();
        for &cols in widths {
            let mut s = cols as u64 * 31 + u64::from(ty.id());
            let mut data = Vec::new();
            for _ in 0..rows * cols / per {
                let mut b: Vec<u8> = (0..size).map(|_| mix(&mut s) as u8).collect();
                let d = ((mix(&mut s) >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.02;
                b[..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
                data.extend_from_slice(&b);
            }
            let w = QMatrix::new(ty, rows, cols, &data).expect("whole blocks");
            let mut want = vec![0.0f32; rows * cols];
            dequantize(ty, &data, &mut want);
            check_kernels(w, &want, &format!("{name} {cols} cols"));
        }
    }
}

#[test]
fn iq4_ids_sizes_and_partial_blocks() {
    assert_eq!(GgmlType::from_id(20), Ok(GgmlType::IQ4_NL));
    assert_eq!(GgmlType::from_id(23), Ok(GgmlType::IQ4_XS));
    for ty in [GgmlType::IQ4_NL, GgmlType::IQ4_XS] {
        assert_eq!(GgmlType::from_id(ty.id()), Ok(ty));
    }
    assert_eq!(GgmlType::IQ4_NL.byte_size(64), Some(36));
    assert_eq!(GgmlType::IQ4_XS.byte_size(512), Some(272));
    assert_eq!(GgmlType::IQ4_XS.byte_size(288), None);
    // IQ4_XS rows are whole 256-weight super-blocks, IQ4_NL ones whole 32-weight blocks.
    assert!(QMatrix::new(GgmlType::IQ4_XS, 1, 288, &[0u8; 153]).is_none());
    assert!(QMatrix::new(GgmlType::IQ4_NL, 1, 288, &[0u8; 162]).is_some());
    // The other IQ types are refused by name, the message listing what is read.
    let e = GgmlType::from_id(21).unwrap_err();
    assert!(
        e.contains("IQ3_S (id 21)") && e.contains("IQ4_NL") && e.contains("IQ4_XS"),
        "{e}"
    );
}
