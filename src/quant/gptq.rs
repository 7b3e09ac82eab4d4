//! GPTQ (Frantar et al., 2022): rounds a layer's weights one input column at a time and
//! spreads each column's rounding error over the columns not yet rounded, weighted by the
//! inverse of the layer's input Hessian `H = 2·XᵀX/n` (`X`: calibration inputs), so that the
//! layer's output on that data changes as little as the grid allows.
//!
//! With `U` the upper Cholesky factor of `(H + λI)⁻¹` (`λ` = `damp` times the mean of
//! `diag H`), for each row `w` and column `i` in order: `q = round(w_i)`,
//! `e = (w_i − q)/U_ii`, `w_j −= e·U_ij` for `j > i`; the reported loss is
//! `Σ (w_i − q)²/(2·U_ii²)`. Rows are independent (they share `U`), so they run in parallel
//! in tiles that reuse each row of `U` from cache. Inputs that calibration never excited
//! (`H_ii = 0`) get `H_ii = 1` and their weights zeroed, as the reference does.
//!
//! Act-order processes columns by decreasing `H_ii`. The grid of a span (a GGUF block) is
//! then fixed up front from the original weights ("static groups"), since a block's columns
//! are no longer consecutive in the processing order; without act-order each span's grid
//! is chosen when GPTQ reaches its first column, from the weights as updated so far. With
//! `block_search` each span's grid is llama.cpp's searched one ([`super::search`], weighted by
//! `diag H` as its importance matrix) instead of the span's plain range: GPTQ then rounds
//! inside the K-quants' per-sub-block scales and minimums that `llama-quantize` would pick.

use faer::linalg::solvers::DenseSolveCore as _;
use rayon::prelude::*;

use super::QuantError;
use super::grid::{Format, Params};
use super::matrix::QuantMatrix;

/// GPTQ's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GptqOptions {
    /// Damping as a fraction of the mean diagonal of `H` (GPTQ's default 0.01).
    pub damp: f64,
    /// Columns by decreasing `H_ii`.
    pub act_order: bool,
    /// Each block's grid by llama.cpp's scale search weighted by `diag H`, not its range.
    pub block_search: bool,
}

impl Default for GptqOptions {
    /// Damping 0.01, act-order on, each block's grid from its range (GPTQ's reference).
    fn default() -> Self {
        GptqOptions {
            damp: 0.01,
            act_order: true,
            block_search: false,
        }
    }
}

/// The result: the quantised matrix and GPTQ's loss `Σ (w − q)²/(2·U_ii²)` over all rows.
pub struct GptqResult {
    /// Codes and grids.
    pub matrix: QuantMatrix,
    /// GPTQ's own loss.
    pub loss: f64,
}

/// The processing order, `U` (upper Cholesky factor of the damped inverse Hessian, permuted
/// to that order; row-major `n x n`), and which inputs are dead.
type Prepared = (Vec<usize>, Vec<f64>, Vec<bool>);

/// [`Prepared`] for the Hessian `h` (`n x n`).
fn prepare(h: &[f64], n: usize, o: GptqOptions) -> Result<Prepared, QuantError> {
    let dead: Vec<bool> = (0..n).map(|i| h[i * n + i] == 0.0).collect();
    let diag: Vec<f64> = (0..n)
        .map(|i| if dead[i] { 1.0 } else { h[i * n + i] })
        .collect();
    let mut perm: Vec<usize> = (0..n).collect();
    if o.act_order {
        // Stable, so ties keep their original order (as a stable argsort would).
        perm.sort_by(|&a, &b| diag[b].total_cmp(&diag[a]));
    }
    let lambda = o.damp * diag.iter().sum::<f64>() / n as f64;
    let hp = faer::Mat::<f64>::from_fn(n, n, |i, j| {
        let (a, b) = (perm[i], perm[j]);
        if a == b {
            diag[a] + lambda
        } else {
            h[a * n + b]
        }
    });
    let bad = || {
        QuantError::Invalid("the calibration Hessian is not positive definite even after damping; raise `damp` or use more calibration text".into())
    };
    let inv = hp.llt(faer::Side::Lower).map_err(|_| bad())?.inverse();
    let l = inv.llt(faer::Side::Lower).map_err(|_| bad())?;
    let lm = l.L();
    let mut u = vec![0.0; n * n];
    for i in 0..n {
        for j in i..n {
            u[i * n + j] = lm[(j, i)];
        }
    }
    Ok((perm, u, dead))
}

/// Rows per tile: each row of `U` is read once per tile.
const TILE: usize = 16;

/// GPTQ on `w` (`rows x cols`, row-major) onto `format`, with `h` the `cols x cols` Hessian.
pub fn gptq(
    w: &[f32],
    rows: usize,
    cols: usize,
    h: &[f64],
    format: Format,
    o: GptqOptions,
) -> Result<GptqResult, QuantError> {
    assert!(
        w.len() == rows * cols && h.len() == cols * cols,
        "GPTQ shapes"
    );
    format.check(cols).map_err(QuantError::Invalid)?;
    if !(o.damp.is_finite() && o.damp >= 0.0) {
        return Err(QuantError::Invalid(format!(
            "damping {} must be a finite number >= 0",
            o.damp
        )));
    }
    let n = cols;
    let span = format.span(n);
    let (perm, u, dead) = prepare(h, n, o)?;
    let imatrix: Vec<f32> = (0..n).map(|i| h[i * n + i] as f32).collect();
    // A span's grid: its range, or the searched one (σ² the mean square of its row).
    let grid = |span_w: &[f32], col0: usize, sigma2: f32| -> Params {
        if o.block_search {
            super::search::search(
                format,
                span_w,
                Some(&imatrix[col0..col0 + span_w.len()]),
                sigma2,
            )
        } else {
            format.params(span_w, 1.0)
        }
    };
    let mean_square = |r: &[f32]| r.iter().map(|x| x * x).sum::<f32>() / r.len() as f32;
    let mut codes = vec![0u8; rows * n];
    let mut params: Vec<Option<Params>> = vec![None; rows * (n / span)];
    let losses: Vec<f64> = codes
        .par_chunks_mut(TILE * n)
        .zip(params.par_chunks_mut(TILE * (n / span)))
        .zip(w.par_chunks(TILE * n))
        .map(|((codes, params), w)| {
            let t = w.len() / n;
            // Each row in processing order, f64, dead inputs zeroed.
            let mut wp: Vec<f64> = (0..t * n)
                .map(|k| {
                    let c = perm[k % n];
                    if dead[c] {
                        0.0
                    } else {
                        f64::from(w[(k / n) * n + c])
                    }
                })
                .collect();
            if o.act_order {
                for r in 0..t {
                    let sigma2 = mean_square(&w[r * n..(r + 1) * n]);
                    for s in 0..n / span {
                        let orig: Vec<f32> = (s * span..(s + 1) * span)
                            .map(|c| if dead[c] { 0.0 } else { w[r * n + c] })
                            .collect();
                        params[r * (n / span) + s] = Some(grid(&orig, s * span, sigma2));
                    }
                }
            }
            let mut loss = 0.0;
            let mut err = vec![0.0f64; t];
            for i in 0..n {
                let c = perm[i];
                let (s, j) = (c / span, c % span);
                let d = u[i * n + i];
                for r in 0..t {
                    let row = &mut wp[r * n..(r + 1) * n];
                    let p = &mut params[r * (n / span) + s];
                    if p.is_none() {
                        // Without act-order `perm` is the identity: the span starts here.
                        let cur: Vec<f32> = row[i..i + span].iter().map(|&x| x as f32).collect();
                        let whole: Vec<f32> = row.iter().map(|&x| x as f32).collect();
                        *p = Some(grid(&cur, i, mean_square(&whole)));
                    }
                    let p = p.as_ref().expect("set above");
                    let q = p.code(j, row[i]);
                    codes[r * n + c] = q;
                    let e = row[i] - f64::from(p.value(j, q));
                    loss += e * e / (2.0 * d * d);
                    err[r] = e / d;
                }
                let ui = &u[i * n + i + 1..(i + 1) * n];
                for (r, &e) in err.iter().enumerate() {
                    let row = &mut wp[r * n + i + 1..(r + 1) * n];
                    row.iter_mut().zip(ui).for_each(|(x, &uij)| *x -= e * uij);
                }
            }
            loss
        })
        .collect();
    Ok(GptqResult {
        matrix: QuantMatrix {
            format,
            rows,
            cols,
            codes,
            params: params
                .into_iter()
                .map(|p| p.expect("every span is reached"))
                .collect(),
        },
        loss: losses.iter().sum(),
    })
}

/// `tr((W − Q)·H·(W − Q)ᵀ)`: the layer's output error on the calibration data (times `2/n`),
/// the quantity GPTQ and RTN are compared by.
pub fn output_error(w: &[f32], q: &[f32], cols: usize, h: &[f64]) -> f64 {
    w.par_chunks(cols)
        .zip(q.par_chunks(cols))
        .map(|(a, b)| {
            let d: Vec<f64> = a
                .iter()
                .zip(b)
                .map(|(&x, &y)| f64::from(x) - f64::from(y))
                .collect();
            let mut s = 0.0;
            for i in 0..cols {
                let hi = &h[i * cols..(i + 1) * cols];
                s += d[i] * d.iter().zip(hi).map(|(x, y)| x * y).sum::<f64>();
            }
            s
        })
        .sum()
}
