//! Round-to-nearest onto a grid, with an optional search of each span's grid: the clip ratio
//! (of a fixed grid from 1 down to 0.5) whose grid gives the smallest squared error, or
//! llama.cpp's scale and minimum search ([`super::search`]); each input weighted by its
//! calibration energy `diag(H)` when given (an estimate of the error the span adds to the
//! layer's output; for the scale search, llama.cpp's importance matrix), else unweighted.

use rayon::prelude::*;

use super::grid::{Format, Params, round_span};
use super::matrix::QuantMatrix;

/// The clip ratios the search tries.
pub const CLIP_RATIOS: [f32; 11] = [1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5];

/// How RTN chooses each span's grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clip {
    /// The full range of the span.
    None,
    /// The ratio in [`CLIP_RATIOS`] with the least (weighted) squared error.
    Search,
    /// llama.cpp's per-block scale (and minimum) search, `llama-quantize`'s rounding: with
    /// `diag(H)` as its importance matrix when given (`--imatrix`), else without.
    Scales,
}

/// The (weighted) squared error of rounding the span `w` onto `p`.
pub(crate) fn span_error(p: &Params, w: &[f32], weight: Option<&[f64]>) -> f64 {
    let codes = round_span(p, w);
    w.iter()
        .zip(codes)
        .enumerate()
        .map(|(j, (&x, q))| {
            let e = f64::from(x) - f64::from(p.value(j, q));
            e * e * weight.map_or(1.0, |h| h[j])
        })
        .sum()
}

/// Rounds `w` (`rows x cols`, row-major) to `format`, choosing each span's grid by `clip`;
/// `diag_h` (one value per input) weights the clipping search's error.
pub fn rtn(
    w: &[f32],
    rows: usize,
    cols: usize,
    format: Format,
    clip: Clip,
    diag_h: Option<&[f64]>,
) -> QuantMatrix {
    assert_eq!(w.len(), rows * cols, "weight shape");
    let span = format.span(cols);
    // Each row's mean square (llama.cpp's σ² of the importance weighting).
    let sigma2: Vec<f32> = if clip == Clip::Scales {
        w.chunks(cols)
            .map(|r| r.iter().map(|x| x * x).sum::<f32>() / cols as f32)
            .collect()
    } else {
        Vec::new()
    };
    let imatrix: Option<Vec<f32>> = diag_h.map(|h| h.iter().map(|&x| x as f32).collect());
    let per_span: Vec<(Vec<u8>, Params)> = w
        .par_chunks(span)
        .enumerate()
        .map(|(k, s)| {
            let col0 = (k * span) % cols;
            let weight = diag_h.map(|h| &h[col0..col0 + s.len()]);
            let p = match clip {
                Clip::None => format.params(s, 1.0),
                Clip::Search => CLIP_RATIOS
                    .iter()
                    .map(|&c| format.params(s, c))
                    .map(|p| (span_error(&p, s, weight), p))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, p)| p)
                    .expect("ratios are not empty"),
                Clip::Scales => {
                    let qw = imatrix.as_ref().map(|h| &h[col0..col0 + s.len()]);
                    super::search::search(format, s, qw, sigma2[k * span / cols])
                }
            };
            (round_span(&p, s), p)
        })
        .collect();
    let mut codes = Vec::with_capacity(w.len());
    let mut params = Vec::with_capacity(per_span.len());
    for (c, p) in per_span {
        codes.extend(c);
        params.push(p);
    }
    QuantMatrix {
        format,
        rows,
        cols,
        codes,
        params,
    }
}
