//! GPTQ against an independent numpy reference (`scripts/gptq_reference.py`: a 64x128 layer
//! with a fixed calibration Hessian, four settings): the same codes, grid values and loss.
//! GPTQ beats RTN on the layer's output error; the clipping search never loses to plain RTN;
//! every GGUF block format's bytes decode (by an independent dequantiser of ggml's layouts,
//! and the crate's reader) to exactly the values the quantiser computed with.

use crate::common;

use orthoformer::io::gguf::GgmlType;
use orthoformer::io::gguf::dtype::dequantize;
use orthoformer::quant::gptq::output_error;
use orthoformer::quant::{Clip, Format, GptqOptions, gptq, rtn};

/// A little-endian `.npy` array of `<f4`, `<f8` or `|u1`, as raw bytes (fixtures only).
fn npy(name: &str) -> Vec<u8> {
    let p = common::repo_root().join("tests/fixtures/quant").join(name);
    let b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(&b[..6], b"\x93NUMPY");
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + hl..].to_vec()
}

fn f32s(name: &str) -> Vec<f32> {
    npy(name)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn f64s(name: &str) -> Vec<f64> {
    npy(name)
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

const SETTINGS: [(&str, u32, usize, bool, bool); 4] = [
    ("sym4_row_act", 4, 0, true, true),
    ("asym4_g32", 4, 32, false, false),
    ("sym8_g32_act", 8, 32, true, true),
    ("asym3_row", 3, 0, false, false),
];

#[test]
fn gptq_matches_the_numpy_reference_and_beats_rtn() {
    let (rows, cols) = (64, 128);
    let w = f32s("gptq_w.npy");
    let h = f64s("gptq_h.npy");
    for (name, bits, group, symmetric, act_order) in SETTINGS {
        let f = Format::Affine {
            bits,
            group,
            symmetric,
        };
        let o = GptqOptions {
            damp: 0.01,
            act_order,
            block_search: false,
        };
        let r = gptq(&w, rows, cols, &h, f, o).unwrap();
        let codes = npy(&format!("gptq_{name}_codes.npy"));
        let same = r
            .matrix
            .codes
            .iter()
            .zip(&codes)
            .filter(|(a, b)| a == b)
            .count();
        assert_eq!(same, rows * cols, "{name}: codes differ from the reference");
        let values = r.matrix.values();
        assert_eq!(
            values,
            f32s(&format!("gptq_{name}_values.npy")),
            "{name}: values"
        );
        let want = f64s(&format!("gptq_{name}_loss.npy"))[0];
        assert!(
            (r.loss - want).abs() <= 1e-9 * want,
            "{name}: loss {} vs reference {want}",
            r.loss
        );
        let plain = rtn(&w, rows, cols, f, Clip::None, None).values();
        let (eg, er) = (
            output_error(&w, &values, cols, &h),
            output_error(&w, &plain, cols, &h),
        );
        assert!(
            eg < er,
            "{name}: GPTQ output error {eg} not below RTN's {er}"
        );
    }
}

#[test]
fn clipping_search_never_loses_to_plain_rtn() {
    let w = f32s("gptq_w.npy");
    for f in [
        Format::Q4_0,
        Format::Q4_1,
        Format::Affine {
            bits: 3,
            group: 32,
            symmetric: true,
        },
    ] {
        let mse =
            |v: &[f32]| -> f64 { w.iter().zip(v).map(|(a, b)| f64::from(a - b).powi(2)).sum() };
        let a = mse(&rtn(&w, 64, 128, f, Clip::None, None).values());
        let b = mse(&rtn(&w, 64, 128, f, Clip::Search, None).values());
        assert!(b <= a, "{f:?}: clip search {b} above plain {a}");
        assert!(
            b < 0.995 * a,
            "{f:?}: clip search found nothing ({b} vs {a})"
        );
    }
}

/// ggml's `dequantize_row_q4_K`, written from the block layout (d, dmin, 12 bytes of 6-bit
/// scales and mins, 128 bytes of nibbles).
fn dequant_q4k(raw: &[u8]) -> Vec<f32> {
    let mut out = Vec::new();
    for b in raw.chunks_exact(144) {
        let (d, dmin) = (
            half::f16::from_le_bytes([b[0], b[1]]).to_f32(),
            half::f16::from_le_bytes([b[2], b[3]]).to_f32(),
        );
        let sc = &b[4..16];
        let scale_min = |j: usize| -> (u8, u8) {
            if j < 4 {
                (sc[j] & 63, sc[j + 4] & 63)
            } else {
                (
                    (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4),
                    (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4),
                )
            }
        };
        let qs = &b[16..];
        for k in 0..4 {
            let (s1, m1) = scale_min(2 * k);
            let (s2, m2) = scale_min(2 * k + 1);
            let (d1, mm1) = (d * f32::from(s1), dmin * f32::from(m1));
            let (d2, mm2) = (d * f32::from(s2), dmin * f32::from(m2));
            let q = &qs[32 * k..32 * (k + 1)];
            out.extend(q.iter().map(|&x| d1 * f32::from(x & 0xF) - mm1));
            out.extend(q.iter().map(|&x| d2 * f32::from(x >> 4) - mm2));
        }
    }
    out
}

#[test]
fn block_bytes_decode_to_the_quantised_values() {
    let (rows, cols) = (8, 512);
    let mut rng = orthoformer::init::rng::seeded(5);
    let w: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let x: f32 = rand::Rng::random_range(&mut rng, -1.0..1.0);
            // Outliers and one all-positive block, the cases a min/scale layout gets wrong.
            if i % 97 == 0 {
                x * 20.0
            } else if (64..96).contains(&(i % cols)) {
                x.abs() + 0.5
            } else {
                x
            }
        })
        .collect();
    let h: Vec<f64> = (0..cols * cols)
        .map(|k| if k % (cols + 1) == 0 { 1.0 } else { 0.0 })
        .collect();
    for f in [Format::Q8_0, Format::Q4_0, Format::Q4_1, Format::Q4K] {
        for q in [
            rtn(&w, rows, cols, f, Clip::None, None),
            rtn(&w, rows, cols, f, Clip::Search, None),
            gptq(&w, rows, cols, &h, f, GptqOptions::default())
                .unwrap()
                .matrix,
        ] {
            let bytes = q.gguf_bytes().unwrap();
            let got = match f {
                Format::Q4K => dequant_q4k(&bytes),
                _ => {
                    let ty = [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1][[
                        Format::Q8_0,
                        Format::Q4_0,
                        Format::Q4_1,
                    ]
                    .iter()
                    .position(|&x| x == f)
                    .unwrap()];
                    let mut out = vec![0.0; rows * cols];
                    dequantize(ty, &bytes, &mut out);
                    out
                }
            };
            assert_eq!(got, q.values(), "{f:?}: the bytes decode to other values");
            let err: f32 = w
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(err < 3.0, "{f:?}: error {err}");
        }
    }
}
