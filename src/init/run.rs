//! `orthoformer init` as one library operation: [`run`] checks an [`InitOptions`] (count,
//! gain, shape, the mimetic shape rule, memory), draws every matrix, measures each
//! orthogonal draw's error and the mimetic products' errors, refuses values that f32 or the
//! moments cannot hold, writes the file, and returns the values with an [`InitReport`].
//! The command line only parses its flags into the options and prints the report.

use std::path::Path;
use std::time::Instant;

use super::InitError;
use super::method::{InitMethod, generate};
use super::mimetic::{MimeticParams, mimetic};
use super::options::InitOptions;
use super::orthogonal::ortho_error;
use crate::io::matrix_file::{FloatType, MatrixFormat, write_matrix};
use crate::io::memory::{bytes, check_fits};
use crate::stats::{Moments, moments, nan_max};

/// What [`run`] drew, measured and wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct InitReport {
    /// The method's name (or `mimetic`).
    pub method: String,
    /// The shape of one matrix (for mimetic, the model width `d`).
    pub shape: Vec<usize>,
    /// Rows of one matrix as the orthogonality error sees it.
    pub rows: usize,
    /// Columns of one matrix (every dimension after the first, multiplied).
    pub cols: usize,
    /// Element type written.
    pub dtype: &'static str,
    /// How many matrices.
    pub count: usize,
    /// Seed of matrix 0.
    pub seed: u64,
    /// The gain the method scaled by.
    pub gain: f64,
    /// The method draws from the Haar measure.
    pub haar: bool,
    /// Largest orthogonality error over the draws (orthogonal methods only).
    pub ortho_error_max: Option<f64>,
    /// Milliseconds per matrix drawn.
    pub ms_per_matrix: f64,
    /// Mean of every value, in the element type written.
    pub mean: f64,
    /// Population standard deviation of every value.
    pub std: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Mimetic only: the largest relative error of `W_Q W_Kᵀ`.
    pub qk_rel_error: Option<f64>,
    /// Mimetic only: the largest relative error of `W_V W_O`.
    pub vo_rel_error: Option<f64>,
    /// The file written, if any.
    pub out: Option<String>,
}

/// The values drawn (f64; the file holds them in the report's element type), the shape of
/// the whole tensor written, and the report.
pub struct InitRun {
    /// Every matrix's values, matrix after matrix.
    pub values: Vec<f64>,
    /// `[count,] rows, cols...` (mimetic: `[count,] 4, d, d`: wq, wk, wv, wo stacked).
    pub out_shape: Vec<usize>,
    /// The measurements.
    pub report: InitReport,
}

fn bad(msg: String) -> crate::Error {
    crate::Error::Init(InitError::BadParam(msg))
}

/// Draws the matrices `o` asks for and writes them to `out` (`.npy`, `.safetensors` or text,
/// by its extension) when given. `progress(done)` counts the matrices drawn. Nothing is
/// written unless every value is finite in the element type and their moments are finite.
pub fn run(
    o: &InitOptions,
    out: Option<&Path>,
    progress: &mut dyn FnMut(usize),
) -> crate::Result<InitRun> {
    let is_mimetic = o.method == "mimetic";
    let method = if is_mimetic {
        None
    } else {
        Some(InitMethod::from_name(&o.method)?)
    };
    let dtype = o.dtype;
    if o.count == 0 {
        return Err(bad("`count` 0: ask for at least one matrix".into()));
    }
    let mut shape = o.shape.clone().unwrap_or_else(|| vec![o.rows, o.cols]);
    let gain = o.params.gain.unwrap_or(1.0);
    if !gain.is_finite() || gain < 0.0 {
        return Err(InitError::BadGain(gain).into());
    }
    super::fan::check_shape(&shape)?;
    if is_mimetic {
        if shape.len() == 2 && shape[0] == shape[1] {
            shape.truncate(1);
        }
        if shape.len() != 1 {
            return Err(bad(format!(
                "mimetic takes `shape` d (the model width), got {shape:?}"
            )));
        }
    }
    let format = out.map(MatrixFormat::from_path).transpose()?;
    let p = &o.params;
    let one = if is_mimetic {
        bytes(&[4, shape[0], shape[0]])
    } else {
        bytes(&shape)
    };
    // Held at once: every value in f64, their f32-rounded copy (also f64) for the moments
    // and the file's bytes; each matrix's own working memory is checked where it is drawn.
    let total = one.and_then(|n| n.checked_mul(o.count));
    check_fits(
        total.and_then(|n| n.checked_mul(8 + 8 + 8)),
        format_args!("{} matrices of shape {shape:?}", o.count),
    )?;
    let total = total.unwrap_or(0);
    let one = one.unwrap_or(0);
    let (rows, cols) = if is_mimetic {
        (shape[0], shape[0])
    } else {
        (shape[0], one / shape[0])
    };
    let mut values = Vec::with_capacity(total);
    let mut err_max: Option<f64> = None;
    let (mut qk, mut vo): (Option<f64>, Option<f64>) = (None, None);
    let mut gen_secs = 0.0;
    for k in 0..o.count {
        let seed = o.seed.wrapping_add(k as u64);
        let t0 = Instant::now();
        let w = match method {
            Some(m) => generate(m, &shape, p, seed)?,
            None => {
                let mm = mimetic(shape[0], o.heads, MimeticParams::default(), seed)?;
                qk = Some(nan_max(qk.unwrap_or(0.0), mm.qk_rel_error));
                vo = Some(nan_max(vo.unwrap_or(0.0), mm.vo_rel_error));
                [mm.wq, mm.wk, mm.wv, mm.wo].concat()
            }
        };
        gen_secs += t0.elapsed().as_secs_f64();
        if method.is_some_and(|m| m.is_orthogonal()) {
            let e = match dtype {
                FloatType::F64 => ortho_error(&w, rows, cols, gain),
                FloatType::F32 => {
                    let w32: Vec<f32> = w.iter().map(|&v| v as f32).collect();
                    ortho_error(&w32, rows, cols, gain)
                }
            };
            err_max = Some(nan_max(err_max.unwrap_or(0.0), e));
        }
        values.extend_from_slice(&w);
        progress(k + 1);
    }
    if dtype == FloatType::F32 {
        // Finite in f64 (the methods check that) but beyond f32's range: infinite weights.
        let over = values.iter().filter(|v| !(**v as f32).is_finite()).count();
        if over > 0 {
            return Err(bad(format!(
                "{over} of {} values exceed f32's range (±3.4e38) and would be written as \
                 infinity: use smaller parameters or `dtype` f64",
                values.len()
            )));
        }
    }
    let mut out_shape: Vec<usize> = if is_mimetic {
        vec![4, rows, cols]
    } else {
        shape.clone()
    };
    if o.count > 1 {
        out_shape.insert(0, o.count);
    }
    // The moments first: values whose spread overflows are refused before anything is written.
    let Moments {
        mean,
        std,
        min,
        max,
    } = match dtype {
        FloatType::F64 => moments(&values),
        FloatType::F32 => moments(&values.iter().map(|&v| v as f32 as f64).collect::<Vec<_>>()),
    };
    if !(mean.is_finite() && std.is_finite()) {
        return Err(bad(format!(
            "the values are so large that their mean or spread overflows (mean {mean}, std \
             {std}): use smaller parameters"
        )));
    }
    if let (Some(path), Some(format)) = (out, format) {
        write_matrix(path, format, dtype, &values, &out_shape)?;
    }
    let report = InitReport {
        method: o.method.clone(),
        shape,
        rows,
        cols,
        dtype: dtype.name(),
        count: o.count,
        seed: o.seed,
        gain,
        haar: method.is_some_and(|m| match m {
            InitMethod::Ortho(o) => o.is_haar(),
            InitMethod::Orthogonal => true,
            _ => false,
        }),
        ortho_error_max: err_max,
        ms_per_matrix: gen_secs * 1e3 / o.count as f64,
        mean,
        std,
        min,
        max,
        qk_rel_error: qk,
        vo_rel_error: vo,
        out: out.map(|p| p.display().to_string()),
    };
    Ok(InitRun {
        values,
        out_shape,
        report,
    })
}
