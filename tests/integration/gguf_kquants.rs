//! The super-block types (Q4_K, Q5_K, Q6_K), BF16 and the 5-bit block types (Q5_0, Q5_1)
//! against llama.cpp's Python reference:
//! `tests/fixtures/gguf/kquants.gguf` (`scripts/kquant_fixture.py`) holds random tensors of
//! each type beside their dequantisation by the `gguf` package. The reader's dequantisation,
//! every SIMD body's `dequantize_rows` and `matvec` are checked against it.

use orthoformer::io::gguf::{GgmlType, GgufFile};
use orthoformer::nn::qmatvec::{QMatrix, dequantize_rows, matvec_rows};
use orthoformer::nn::simd::{available, with_isa};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/gguf/kquants.gguf"
);

#[test]
fn super_block_types_match_the_gguf_package() {
    let g = GgufFile::open(std::path::Path::new(FIXTURE)).expect("fixture opens");
    let (rows, cols) = (2usize, 512usize);
    let dims = [cols as u64, rows as u64];
    for (name, ty) in [
        ("q4_k", GgmlType::Q4_K),
        ("q5_k", GgmlType::Q5_K),
        ("q6_k", GgmlType::Q6_K),
        ("bf16", GgmlType::BF16),
        ("q5_0", GgmlType::Q5_0),
        ("q5_1", GgmlType::Q5_1),
    ] {
        let want = g.tensor_f32(&format!("{name}.f32"), &dims).unwrap();
        let got = g.tensor_f32(name, &dims).unwrap();
        assert_eq!(g.tensor(name).unwrap().ty, ty);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                a.to_bits() == b.to_bits(),
                "{name} weight {i}: {a} (crate) vs {b} (gguf package)"
            );
        }
        let (_, bytes) = g.tensor_bytes(name, &dims).unwrap();
        let w = QMatrix::new(ty, rows, cols, bytes.bytes()).expect("whole super-blocks");
        let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 0.61).cos()).collect();
        for isa in available() {
            let mut d = vec![f32::NAN; rows * cols];
            with_isa(isa, || dequantize_rows(&mut d, w));
            assert!(
                d.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name} {isa:?}: dequantize_rows differs from the gguf package"
            );
            let mut y = vec![f32::NAN; rows];
            with_isa(isa, || matvec_rows(&mut y, w, &x));
            for (r, &g) in y.iter().enumerate() {
                let row = &want[r * cols..(r + 1) * cols];
                let (s, a) = row
                    .iter()
                    .zip(&x)
                    .fold((0.0f64, 0.0f64), |(s, a), (&w, &x)| {
                        let p = f64::from(w) * f64::from(x);
                        (s + p, a + p.abs())
                    });
                assert!(
                    (f64::from(g) - s).abs() <= 1e-6 * a,
                    "{name} {isa:?} row {r}: {g} vs {s}"
                );
            }
        }
    }
}

#[test]
fn partial_super_blocks_are_refused() {
    // A row of 300 weights is not a whole number of 256-weight blocks.
    assert!(QMatrix::new(GgmlType::Q4_K, 1, 300, &[0u8; 144]).is_none());
    assert_eq!(GgmlType::Q6_K.byte_size(512), Some(420));
    assert_eq!(GgmlType::Q5_K.byte_size(300), None);
    for id in [12, 13, 14, 30] {
        assert_eq!(GgmlType::from_id(id).unwrap().id(), id);
    }
    let e = GgmlType::from_id(11).unwrap_err();
    assert!(e.contains("Q3_K") && e.contains("Q4_K"), "{e}");
}
