//! llama.cpp's per-block scale (and minimum) search, the rounding `llama-quantize` does, with
//! and without an importance matrix: for each block the step (and offset) that minimise the
//! weighted squared error `Σ wᵢ·(xᵢ − value(qᵢ))²` over a small set of candidate scales, each
//! refined by weighted least squares. Ported from `ggml-quants.c` (llama.cpp as vendored by
//! llama-cpp-python 0.3.36): `make_qx_quants` (symmetric), `make_qkx2_quants`/
//! `make_qkx3_quants` (affine, offset ≤ 0 kept), `make_qp_quants` (the K-quants' 6-bit
//! super-block scales).
//!
//! Weights: with an importance vector `qw` (llama.cpp's imatrix, the mean square of each input
//! over calibration text; here the diagonal of the calibration Hessian, which differs by a
//! constant factor) each weight counts `qwᵢ·√(σ² + xᵢ²)`, `σ²` the mean square of the row (of
//! the super-block, times 2, for the K-quants); without one llama.cpp's reference choices
//! (`Q4_0`, `Q4_1`, `Q5_0`, `Q5_1`, `Q8_0`: the plain range, [`Format::params`]; the
//! K-quants: a search weighted by `x²` or `avg|x| + |x|`).
//!
//! The codes are not kept: [`Params::code`] rounds every weight to its nearest grid value,
//! which is the least error for any weighting once the grid is fixed. Computed in f32 as
//! llama.cpp does (`round_ties_even` is its `nearest_int`).

use super::grid::{Format, Params, h, kquant_grid, q6k_grid, six_bits};

/// Below this a block is all zeros (llama.cpp's `GROUP_MAX_EPS`).
const EPS: f32 = 1e-15;

/// The searched grid of one span `w` of `format`: `qw` the importance of each of its inputs
/// (`None`: llama.cpp without an imatrix) and `row_sigma2` the mean square of the whole row
/// the span belongs to (used with `qw` by the 32-weight formats).
pub fn search(format: Format, w: &[f32], qw: Option<&[f32]>, row_sigma2: f32) -> Params {
    let weights = |x: &[f32], q: &[f32], sigma2: f32| -> Vec<f32> {
        x.iter()
            .zip(q)
            .map(|(&x, &q)| q * (sigma2 + x * x).sqrt())
            .collect()
    };
    match (format, qw) {
        (Format::Q4_0 | Format::Q5_0, Some(q)) => {
            let nmax = if format == Format::Q4_0 { 8 } else { 16 };
            let (d, bd) = h(make_qx_quants(w, nmax, Some(&weights(w, q, row_sigma2))));
            Params {
                sub: w.len(),
                d: vec![d],
                m: vec![0.0],
                zero: nmax,
                qmax: 2 * nmax - 1,
                head: bd.to_vec(),
                levels: None,
            }
        }
        (Format::Q4_1 | Format::Q5_1, Some(q)) => {
            let qmax = format.qmax();
            let (scale, min) = make_qkx_quants(w, qmax, &weights(w, q, row_sigma2), K3);
            let (d, bd) = h(scale);
            let (m, bm) = h(-min);
            Params {
                sub: w.len(),
                d: vec![d],
                m: vec![m],
                zero: 0,
                qmax,
                head: [bd, bm].concat(),
                levels: None,
            }
        }
        (Format::Q4K | Format::Q5K, _) => kquant(format, w, qw),
        (Format::Iq4Nl | Format::Iq4Xs, _) => super::iq4::search(format, w, qw),
        (Format::Q6K, _) => {
            let scales: Vec<f32> = w
                .chunks(16)
                .enumerate()
                .map(|(i, s)| make_qx_quants(s, 32, qw.map(|q| &q[16 * i..16 * i + 16])))
                .collect();
            q6k_grid(&scales)
        }
        _ => format.params(w, 1.0),
    }
}

/// The search settings of `make_qkx2_quants`/`make_qkx3_quants`: `(rmin, rdelta, nstep)`.
type Steps = (f32, f32, usize);
/// `make_qkx3_quants` with an importance matrix (every affine format).
const K3: Steps = (-0.9, 0.05, 36);

/// One `Q4_K`/`Q5_K` super-block (llama.cpp's `quantize_row_q{4,5}_K_ref` without `qw`,
/// `quantize_row_q{4,5}_K_impl` with it).
fn kquant(format: Format, x: &[f32], qw: Option<&[f32]>) -> Params {
    let qmax = format.qmax();
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    let mut sw = [0.0f32; 8];
    let sigma2 = 2.0 * x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    for (j, s) in x.chunks(32).enumerate() {
        let w: Vec<f32> = match qw {
            Some(q) => s
                .iter()
                .zip(&q[32 * j..32 * j + 32])
                .map(|(&v, &q)| q * (sigma2 + v * v).sqrt())
                .collect(),
            None => {
                let av = (s.iter().map(|v| v * v).sum::<f32>() / 32.0).sqrt();
                s.iter().map(|v| av + v.abs()).collect()
            }
        };
        sw[j] = w.iter().sum();
        let steps = match (qw, format) {
            (Some(_), _) => K3,
            (None, Format::Q4K) => (-1.0, 0.1, 20),
            (None, _) => (-0.5, 0.1, 15),
        };
        (scales[j], mins[j]) = make_qkx_quants(s, qmax, &w, steps);
    }
    let ((ls, d), (lm, dmin)) = if qw.is_some() {
        (make_qp_quants(&scales, &sw), make_qp_quants(&mins, &sw))
    } else {
        (six_bits(&scales), six_bits(&mins))
    };
    kquant_grid(&ls, &lm, d, dmin, qmax)
}

/// The symmetric step of a block for codes `−nmax..nmax−1` (`make_qx_quants` with its
/// `rmse_type` 1: weights `qw`, or `x²` without): 19 candidate steps around `max/−nmax`, each
/// refined to `Σwxl/Σwl²`, the one with the largest `(Σwxl)²/Σwl²` kept.
fn make_qx_quants(x: &[f32], nmax: i32, qw: Option<&[f32]>) -> f32 {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < EPS {
        return 0.0;
    }
    let nm = nmax as f32;
    let weight = |i: usize| qw.map_or(x[i] * x[i], |q| q[i]);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for (i, &v) in x.iter().enumerate() {
            let l = (iscale * v).round_ties_even().clamp(-nm, nm - 1.0);
            let w = weight(i);
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let (sumlx, suml2) = sums(-nm / max);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&i| i != 0) {
        let (sumlx, suml2) = sums(-(nm + 0.1 * is as f32) / max);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// The affine step and (non-negative) offset of a block for codes `0..=nmax`
/// (`make_qkx2_quants`/`make_qkx3_quants`, squared error): the plain range, then `nstep + 1`
/// candidate steps, each refined by the weighted least-squares fit of `x ≈ scale·l + min`
/// (`min ≤ 0`), the one of least weighted error kept. Returns `(scale, −min)`.
fn make_qkx_quants(x: &[f32], nmax: i32, w: &[f32], (rmin, rdelta, nstep): Steps) -> (f32, f32) {
    let nm = nmax as f32;
    let mut min = x.iter().copied().fold(x[0], f32::min);
    let max = x.iter().copied().fold(x[0], f32::max);
    let sum_w: f32 = w.iter().sum();
    let sum_x: f32 = x.iter().zip(w).map(|(v, w)| v * w).sum();
    if min > 0.0 {
        min = 0.0;
    }
    if max <= min {
        return (0.0, -min);
    }
    let codes = |iscale: f32, min: f32| -> Vec<f32> {
        x.iter()
            .map(|&v| (iscale * (v - min)).round_ties_even().clamp(0.0, nm))
            .collect()
    };
    let error = |l: &[f32], scale: f32, min: f32| -> f32 {
        l.iter()
            .zip(x)
            .zip(w)
            .map(|((&l, &v), &w)| {
                let d = scale * l + min - v;
                w * d * d
            })
            .sum()
    };
    let iscale = nm / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best = error(&codes(iscale, min), scale, min);
    // As llama.cpp: each candidate is measured from the offset of the best fit so far.
    for is in 0..=nstep {
        let iscale = (rmin + rdelta * is as f32 + nm) / (max - min);
        let l = codes(iscale, min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for ((&l, &v), &w) in l.iter().zip(x).zip(w) {
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * v;
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let e = error(&l, this_scale, this_min);
            if e < best {
                best = e;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// The K-quants' super-block unit and 6-bit codes of non-negative values `x`, weighted by
/// `qw` (`make_qp_quants` with `nmax` 63): nine candidate units around `max/63`, then up to
/// five passes moving single codes while the least-squares fit improves.
fn make_qp_quants(x: &[f32], qw: &[f32]) -> (Vec<u8>, f32) {
    const NMAX: f32 = 63.0;
    let max = x.iter().fold(0.0f32, |a, &v| a.max(v));
    if max < EPS {
        return (vec![0; x.len()], 0.0);
    }
    let mse = |iscale: f32, cap: bool| -> f32 {
        let scale = 1.0 / iscale;
        x.iter()
            .zip(qw)
            .map(|(&v, &w)| {
                let mut l = (iscale * v).round_ties_even();
                if cap {
                    l = l.min(NMAX);
                }
                let d = v - scale * l;
                w * d * d
            })
            .sum()
    };
    let mut iscale = NMAX / max;
    let mut best = mse(iscale, false);
    for is in (-4..=4).filter(|&i| i != 0) {
        let cand = (0.1 * is as f32 + NMAX) / max;
        let e = mse(cand, true);
        if e < best {
            best = e;
            iscale = cand;
        }
    }
    let mut l: Vec<f32> = x
        .iter()
        .map(|&v| (iscale * v).round_ties_even().min(NMAX))
        .collect();
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for ((&v, &w), &l) in x.iter().zip(qw).zip(&l) {
        sumlx += w * v * l;
        suml2 += w * l * l;
    }
    for _ in 0..5 {
        let mut changed = false;
        for i in 0..x.len() {
            let w = qw[i];
            let slx = sumlx - w * x[i] * l[i];
            let sl2 = suml2 - w * l[i] * l[i];
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = (x[i] * sl2 / slx).round_ties_even().min(NMAX);
                if new_l != l[i] {
                    let (slx, sl2) = (slx + w * x[i] * new_l, sl2 + w * new_l * new_l);
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let unit = if suml2 > 0.0 { sumlx / suml2 } else { 0.0 };
    (l.iter().map(|&v| v.max(0.0) as u8).collect(), unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::grid::round_span;
    use crate::quant::rtn::span_error;

    /// A row with an outlier and a skew, where a plain range wastes codes.
    fn row(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let t = (i as f32 * 0.731 + seed as f32).sin();
                t * t * t + if i % 97 == 3 { 2.5 } else { 0.0 }
            })
            .collect()
    }

    fn err(p: &Params, w: &[f32], qw: &[f32]) -> f64 {
        let weight: Vec<f64> = qw.iter().map(|&q| f64::from(q)).collect();
        span_error(p, w, Some(&weight))
    }

    #[test]
    fn the_search_never_loses_to_the_plain_range_on_its_own_weighting() {
        for f in Format::BLOCK_FORMATS {
            if f == Format::Q8_0 {
                continue;
            }
            let span = f.span(512);
            let (mut plain, mut searched) = (0.0, 0.0);
            for seed in 0..8 {
                let w = row(span, seed);
                let qw: Vec<f32> = (0..span).map(|i| 1.0 + (i % 7) as f32).collect();
                let s2 = w.iter().map(|v| v * v).sum::<f32>() / span as f32;
                let imp: Vec<f32> = w
                    .iter()
                    .zip(&qw)
                    .map(|(&x, &q)| q * (s2 + x * x).sqrt())
                    .collect();
                plain += err(&f.params(&w, 1.0), &w, &imp);
                searched += err(&search(f, &w, Some(&qw), s2), &w, &imp);
            }
            assert!(
                searched < plain,
                "{f:?}: searched {searched} vs plain {plain}"
            );
        }
    }

    #[test]
    fn an_all_zero_block_gives_zeros() {
        for f in Format::BLOCK_FORMATS {
            let w = vec![0.0; f.span(256)];
            let p = search(f, &w, Some(&vec![1.0; w.len()]), 0.0);
            let codes = round_span(&p, &w);
            assert!(
                codes.iter().enumerate().all(|(j, &q)| p.value(j, q) == 0.0),
                "{f:?}"
            );
        }
    }
}
