//! What a model must be for a GGUF block format to hold it, checked before and after it is
//! quantised, so a finite model never becomes a file of infinities and a NaN one is never
//! quantised.
//!
//! - Every weight must be finite ([`check_finite_model`]): a block's maximum skips NaN, so a
//!   NaN weight was silently rounded to a code and the file looked fine.
//! - Every block's f16 scale must be finite ([`check_fits`] before, [`check_quantized`]
//!   after): a `q4_0` block scale is `max|w|/8`, so weights beyond 8·65504 ≈ 5.2e5 overflow
//!   f16 and the file holds infinity (`q8_0`'s `/127` holds up to about 8.3e6, `q5_0`'s `/16`
//!   1.05e6, `q4_1`'s and `q5_1`'s minimum is itself an f16, the `dmin` of `q4_k` and `q5_k`
//!   overflows beyond 63·65504, `q6_k`'s `d` beyond 32·128·65504). The refusal names
//!   the tensor, the row, the magnitude, and the formats that would hold it. GPTQ moves
//!   weights as it spreads rounding errors, hence the check after as well.

use super::QuantError;
use super::grid::Format;
use super::matrix::QuantMatrix;
use crate::io::finite::{check_holds, nan_max};
use crate::io::gguf::GgmlType;
use crate::model::llama::{LayerTensor, LlamaWeights};

/// The Hugging Face name of matrix `k` (q, k, v, o, gate, up, down: the order
/// [`super::model::quantize_model`] takes them in) of layer `layer`.
pub fn matrix_name(layer: usize, k: usize) -> String {
    LayerTensor::MATRICES[k].hf_weight(layer)
}

/// Refuses a model with a weight that is NaN or infinite, naming the tensor.
pub fn check_finite_model(w: &LlamaWeights) -> Result<(), QuantError> {
    for (name, _, data) in w.hf_tensors() {
        check_holds(&name, data, GgmlType::F32).map_err(QuantError::Invalid)?;
    }
    Ok(())
}

/// Whether every scale and minimum of `format`'s grid for the span `s` is finite.
fn holds(format: Format, s: &[f32]) -> bool {
    let p = format.params(s, 1.0);
    p.d.iter().chain(&p.m).all(|x| x.is_finite())
}

/// Whether `format` can take rows of `cols` inputs and hold every span of `row`.
fn holds_row(format: Format, row: &[f32], cols: usize) -> bool {
    format.check(cols).is_ok() && row.chunks(format.span(cols)).all(|s| holds(format, s))
}

/// The refusal of row `r` of tensor `name` (rows of `cols` inputs in `w`) that `format`
/// cannot store, naming the formats that can.
fn overflow(format: Format, name: &str, w: &[f32], r: usize, cols: usize) -> QuantError {
    let row = &w[r * cols..((r + 1) * cols).min(w.len())];
    let amax = row.iter().fold(0.0, |m, x| nan_max(m, f64::from(x.abs())));
    let others: Vec<&str> = Format::FILE_NAMES
        .iter()
        .filter_map(|n| n.parse::<Format>().ok())
        .filter(|&f| f != format && holds_row(f, row, cols))
        .filter_map(Format::file_name)
        .collect();
    let advice = if others.is_empty() {
        "no GGUF block format can hold it: keep this model in f32".to_string()
    } else {
        format!(
            "{} can hold it, or keep this model in f32",
            others.join(" or ")
        )
    };
    let fmt = format
        .file_name()
        .map_or_else(|| format!("{format:?}"), String::from);
    QuantError::Invalid(format!(
        "tensor {name}: row {r} holds weights up to {amax:e} in magnitude, beyond what {fmt} \
         can store (a block's f16 scale would pass f16's largest value 65504, and the file \
         would hold infinity); {advice}"
    ))
}

/// Refuses the matrix `w` (rows of `cols` inputs, tensor `name`) when a span's `format` grid
/// would overflow f16 (see the module doc). Call it on the weights to be quantised, before
/// any work.
pub fn check_fits(format: Format, name: &str, w: &[f32], cols: usize) -> Result<(), QuantError> {
    let span = format.span(cols);
    match w.chunks(span).position(|s| !holds(format, s)) {
        Some(k) => Err(overflow(format, name, w, k * span / cols, cols)),
        None => Ok(()),
    }
}

/// Refuses a quantised matrix holding a scale or minimum that is not finite; `w` are the
/// weights it was quantised from (to say how large they were).
pub fn check_quantized(q: &QuantMatrix, name: &str, w: &[f32]) -> Result<(), QuantError> {
    let span = q.format.span(q.cols);
    let bad = q
        .params
        .iter()
        .position(|p| !p.d.iter().chain(&p.m).all(|x| x.is_finite()));
    match bad {
        Some(k) => Err(overflow(q.format, name, w, k * span / q.cols, q.cols)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(big: f32) -> Vec<f32> {
        let mut w: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
        w[5] = big;
        w
    }

    #[test]
    fn each_format_refuses_the_weights_its_f16_scales_cannot_hold() {
        // (format, largest finite |w| it holds, one it does not).
        for (f, ok, bad) in [
            (Format::Q8_0, 8.0e6, 8.4e6),
            (Format::Q4_0, 5.2e5, 5.3e5),
            (Format::Q4_1, 6.5e4, 6.6e4),
            (Format::Q4K, 4.1e6, 4.2e6),
            (Format::Q5_0, 1.04e6, 1.06e6),
            (Format::Q5_1, 6.5e4, 6.6e4),
            (Format::Q5K, 4.1e6, 4.2e6),
            (Format::Q6K, 2.6e8, 2.8e8),
            (Format::Iq4Nl, 8.0e6, 8.4e6),
            (Format::Iq4Xs, 2.6e8, 2.7e8),
        ] {
            assert!(check_fits(f, "w", &row(-ok), 256).is_ok(), "{f:?} {ok}");
            let e = check_fits(f, "model.layers.0.mlp.up_proj.weight", &row(-bad), 256)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("model.layers.0.mlp.up_proj.weight")
                    && e.contains("row 0")
                    && e.contains("65504"),
                "{e}"
            );
        }
        let e = check_fits(Format::Q4_0, "w", &row(1e6), 256).unwrap_err();
        assert!(
            e.to_string().contains(
                "q8_0 or q6_k or q5_k or q5_1 or q5_0 or q4_k or iq4_nl or iq4_xs can hold it"
            ),
            "{e}"
        );
        let e = check_fits(Format::Q8_0, "w", &row(1e9), 256).unwrap_err();
        assert!(e.to_string().contains("no GGUF block format"), "{e}");
    }

    #[test]
    fn a_quantised_matrix_with_an_infinite_scale_is_refused() {
        let w = row(1e6);
        let q = super::super::rtn(&w, 1, 256, Format::Q4_0, super::super::Clip::None, None);
        let e = check_quantized(&q, "w", &w).unwrap_err().to_string();
        assert!(e.contains("q4_0") && e.contains("1e6"), "{e}");
        let w = row(1.0);
        let q = super::super::rtn(&w, 1, 256, Format::Q4_0, super::super::Clip::None, None);
        assert!(check_quantized(&q, "w", &w).is_ok());
    }
}
