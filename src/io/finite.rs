//! What a stored type can hold, checked on every tensor before it is written, and the one
//! maximum every check reports.
//!
//! A writer that stores NaN or infinity writes a model that computes NaN, and one that rounds
//! a finite f32 into a narrower type writes infinity where the type's range ends (f16 above
//! 65504, bf16 above about 3.39e38): either way the command exits 0 with a broken file unless
//! the values are checked against the type they are about to become. [`check_holds`] makes
//! that check for the float types, the GGUF and safetensors writers call it on every tensor,
//! and [`check_blocks`] decodes what a block writer was given (a block's f16 scale that
//! overflowed decodes to infinity or NaN). The quantisers check the scales they compute
//! against f16 before that, where they can say which format would hold the weights
//! (`quant::fits`).
//!
//! An error maximum must not skip NaN, as `f32::max` and `f64::max` do (a NaN difference
//! would report 0.0 and pass): [`max_abs_diff`] and every other check fold with
//! [`nan_max`].

use half::{bf16, f16};

use super::gguf::GgmlType;
use super::gguf::dtype::dequantize;
pub use crate::stats::nan_max;

/// The largest finite f16.
pub const F16_MAX: f32 = 65504.0;

/// The first value of `data` that is NaN or infinite, with its index.
pub fn first_not_finite(data: &[f32]) -> Option<(usize, f32)> {
    data.iter()
        .enumerate()
        .find(|(_, x)| !x.is_finite())
        .map(|(i, &x)| (i, x))
}

/// The refusal of a value that is NaN or infinite in tensor `name`.
fn not_finite(name: &str, i: usize, x: f32) -> String {
    format!(
        "tensor {name} holds {x} (value {i}): weights that are NaN or infinite make the model \
         compute NaN, so it is never written (the source model, or a step before writing, is \
         broken)"
    )
}

/// Why `data` (tensor `name`) cannot be stored as the float type `ty`, if it cannot: a value
/// that is NaN or infinite, or a finite one that `ty` rounds to infinity (F16 beyond 65504:
/// exactly, from 65520 on, since 65504 < |x| < 65520 rounds down to 65504; BF16 beyond about
/// 3.39e38). Block types hold what their scales hold: see [`check_blocks`].
pub fn check_holds(name: &str, data: &[f32], ty: GgmlType) -> Result<(), String> {
    if let Some((i, x)) = first_not_finite(data) {
        return Err(not_finite(name, i, x));
    }
    let (largest, overflows): (&str, fn(f32) -> bool) = match ty {
        GgmlType::F16 => ("65504", |x| f16::from_f32(x).is_infinite()),
        GgmlType::BF16 => ("3.39e38", |x| bf16::from_f32(x).is_infinite()),
        _ => return Ok(()),
    };
    match data.iter().find(|&&x| overflows(x)) {
        Some(x) => Err(format!(
            "tensor {name} holds {x}, beyond {ty:?}'s largest value {largest} (it would be \
             written as infinity); write f32"
        )),
        None => Ok(()),
    }
}

/// Why the blocks `raw` of type `ty` (tensor `name`, whole blocks) do not decode to finite
/// values, if they do not: the backstop of a writer of bytes a quantiser encoded, decoding
/// a few blocks at a time into a small buffer.
pub fn check_blocks(name: &str, raw: &[u8], ty: GgmlType) -> Result<(), String> {
    const BLOCKS: usize = 64;
    let (per, bytes) = ty.block();
    let mut out = vec![0.0f32; per * BLOCKS];
    for (k, chunk) in raw.chunks(bytes * BLOCKS).enumerate() {
        let out = &mut out[..chunk.len() / bytes * per];
        dequantize(ty, chunk, out);
        if let Some((i, x)) = first_not_finite(out) {
            let at = k * per * BLOCKS + i;
            return Err(match ty {
                GgmlType::F32 => not_finite(name, at, x),
                _ => format!(
                    "tensor {name}: its {ty:?} block holding value {at} decodes to {x} (a scale \
                     beyond f16's largest value 65504, or weights that were not finite); \
                     nothing written"
                ),
            });
        }
    }
    Ok(())
}

/// `max |a_i − b_i|` over the pairs of `a` and `b`, in f64: NaN when any difference is NaN
/// (a NaN or an infinity on both sides), never skipped; 0 for empty slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .fold(0.0, |m, (x, y)| nan_max(m, f64::from((x - y).abs())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_and_infinity_are_refused_in_every_type() {
        for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                let e = check_holds("w", &[1.0, bad], ty).unwrap_err();
                assert!(e.contains("tensor w holds") && e.contains("value 1"), "{e}");
            }
        }
    }

    #[test]
    fn f16_refuses_exactly_what_it_rounds_to_infinity() {
        let ok = [65504.0, -65504.0, 65519.0, 1e-9];
        assert!(check_holds("w", &ok, GgmlType::F16).is_ok());
        for x in [65520.0f32, -1e7] {
            let e = check_holds("w", &[0.0, x], GgmlType::F16).unwrap_err();
            assert!(e.contains("65504") && e.contains("write f32"), "{e}");
        }
        assert!(check_holds("w", &[1e7, f32::MAX], GgmlType::F32).is_ok());
        assert!(check_holds("w", &[1e7], GgmlType::BF16).is_ok());
        assert!(check_holds("w", &[f32::MAX], GgmlType::BF16).is_err());
    }

    #[test]
    fn a_block_whose_scale_overflowed_is_refused() {
        // One Q8_0 block: scale f16 infinity, codes 1.
        let mut raw = f16::INFINITY.to_le_bytes().to_vec();
        raw.extend([1u8; 32]);
        let e = check_blocks("blk.0.attn_q.weight", &raw, GgmlType::Q8_0).unwrap_err();
        assert!(
            e.contains("blk.0.attn_q.weight") && e.contains("Q8_0"),
            "{e}"
        );
        let mut raw = f16::from_f32(2.0).to_le_bytes().to_vec();
        raw.extend([1u8; 32]);
        assert!(check_blocks("w", &raw.repeat(100), GgmlType::Q8_0).is_ok());
        let f: Vec<u8> = [1.0f32, f32::NAN]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert!(check_blocks("n", &f, GgmlType::F32).is_err());
    }

    #[test]
    fn the_maximum_keeps_nan() {
        assert_eq!(max_abs_diff(&[1.0, 5.0], &[1.5, 2.0]), 3.0);
        assert!(max_abs_diff(&[1.0, f32::NAN, 2.0], &[1.0, 1.0, 9.0]).is_nan());
        assert!(max_abs_diff(&[f32::INFINITY], &[f32::INFINITY]).is_nan());
        assert_eq!(max_abs_diff(&[f32::INFINITY], &[0.0]), f64::INFINITY);
        assert_eq!(max_abs_diff(&[], &[]), 0.0);
    }
}
