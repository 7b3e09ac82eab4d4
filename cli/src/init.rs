//! `orthoformer init`: generate random orthogonal initial weights, check them, and write them
//! to `.npy` or `.safetensors`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};

use super::Outcome;
use super::common::{print_json, progress_bar};
use crate::output::outln;
use orthoformer::init::method::{InitMethod, InitParams, generate};
use orthoformer::init::mimetic::{MimeticParams, mimetic};
use orthoformer::init::options::InitOptions;
use orthoformer::init::orthogonal::ortho_error;
use orthoformer::init::stats::nan_max;
use orthoformer::io::matrix_file::{FloatType, MatrixFormat, write_matrix};

/// Flags of `orthoformer init`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Methods:\n  qr           Householder QR of a Gaussian matrix with the sign fix (Haar)\n  \
svd          polar factor U Vᵀ of a Gaussian matrix (Haar)\n  \
householder  Stewart's product of random reflectors, O(m n²) (Haar)\n  \
cayley       (I - A)(I + A)⁻¹ of a random skew-symmetric A: orthogonal but NOT Haar\n\n\
Matrix k of --count N uses seed + k. Tall matrices (rows >= cols) have orthonormal columns,\n\
wide ones orthonormal rows, both scaled by --gain."
)]
pub struct InitArgs {
    /// Method: qr, svd, householder, cayley, any torch.nn.init name in kebab-case, zer-o or
    /// mimetic (see --list).
    #[arg(long, default_value_t = InitOptions::default().method)]
    pub method: String,
    /// Print every method with a one-line description and exit.
    #[arg(long)]
    pub list: bool,
    /// Tensor shape, comma-separated (e.g. 256,128 or 64,32,3,3); overrides --rows/--cols.
    /// For mimetic: the model width d (one number).
    #[arg(long)]
    pub shape: Option<String>,
    /// Kaiming's nonlinearity (default leaky_relu).
    #[arg(long)]
    pub nonlinearity: Option<String>,
    /// Kaiming's negative slope (default 0).
    #[arg(long, allow_negative_numbers = true)]
    pub a: Option<f64>,
    /// Kaiming's mode: fan_in (default) or fan_out.
    #[arg(long)]
    pub mode: Option<String>,
    /// Mean of normal / trunc-normal (default 0).
    #[arg(long, allow_negative_numbers = true)]
    pub mean: Option<f64>,
    /// Standard deviation (normal, trunc-normal: 1; sparse: 0.01).
    #[arg(long, allow_negative_numbers = true)]
    pub std: Option<f64>,
    /// Lower bound (uniform: 0, trunc-normal: -2).
    #[arg(long, allow_negative_numbers = true)]
    pub lo: Option<f64>,
    /// Upper bound (uniform: 1, trunc-normal: 2).
    #[arg(long, allow_negative_numbers = true)]
    pub hi: Option<f64>,
    /// Value of constant.
    #[arg(long, allow_negative_numbers = true)]
    pub val: Option<f64>,
    /// Fraction of zeros per column for sparse, in [0, 1].
    #[arg(long, allow_negative_numbers = true)]
    pub sparsity: Option<f64>,
    /// Dirac's groups (must divide the output channels).
    #[arg(long)]
    pub groups: Option<usize>,
    /// Mimetic: number of attention heads (must divide the width).
    #[arg(long, default_value_t = InitOptions::default().heads)]
    pub heads: usize,
    /// Number of rows.
    #[arg(long, default_value_t = InitOptions::default().rows)]
    pub rows: usize,
    /// Number of columns.
    #[arg(long, default_value_t = InitOptions::default().cols)]
    pub cols: usize,
    /// Scale of the result: `WᵀW = gain² I` (also Xavier's gain). Default 1.
    #[arg(long, allow_negative_numbers = true)]
    pub gain: Option<f64>,
    /// Random seed (matrix k uses seed + k).
    #[arg(long, default_value_t = InitOptions::default().seed)]
    pub seed: u64,
    /// Element type of the output: f32 or f64 (always computed in f64).
    #[arg(long, default_value_t = InitOptions::default().dtype.name().to_string())]
    pub dtype: String,
    /// How many matrices to generate.
    #[arg(long, default_value_t = InitOptions::default().count)]
    pub count: usize,
    /// Output file: `.npy` (shape [count, rows, cols], or [rows, cols] when count is 1) or
    /// `.safetensors` (one tensor named `weight` of that shape).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON object instead of the human summary.
    #[arg(long)]
    pub json: bool,
}

/// The JSON report of one `init` run.
#[derive(Debug, serde::Serialize)]
struct Report {
    method: String,
    shape: Vec<usize>,
    rows: usize,
    cols: usize,
    dtype: &'static str,
    count: usize,
    seed: u64,
    gain: f64,
    haar: bool,
    /// Only for orthogonal methods.
    ortho_error_max: Option<f64>,
    ms_per_matrix: f64,
    mean: f64,
    std: f64,
    min: f64,
    max: f64,
    /// Only for mimetic: the largest relative error of `W_Q W_Kᵀ` and of `W_V W_O`.
    qk_rel_error: Option<f64>,
    vo_rel_error: Option<f64>,
    out: Option<String>,
}

/// Parses `256,128[,3,3]`; every entry a positive integer.
fn parse_shape(s: &str) -> anyhow::Result<Vec<usize>> {
    let dims: Vec<i64> = s
        .split(',')
        .map(|d| d.trim().parse::<i64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            anyhow::anyhow!("bad --shape {s:?}: write comma-separated sizes, e.g. 256,128")
        })?;
    if dims.iter().any(|&d| d <= 0) {
        bail!("bad --shape {s:?}: every dimension must be at least 1");
    }
    Ok(dims.into_iter().map(|d| d as usize).collect())
}

impl InitArgs {
    /// The library's options these flags ask for (shape and element type checked).
    pub fn options(&self) -> anyhow::Result<InitOptions> {
        Ok(InitOptions {
            method: self.method.clone(),
            shape: self.shape.as_deref().map(parse_shape).transpose()?,
            rows: self.rows,
            cols: self.cols,
            heads: self.heads,
            params: InitParams {
                gain: self.gain,
                nonlinearity: self.nonlinearity.clone(),
                a: self.a,
                mode: self.mode.clone(),
                mean: self.mean,
                std: self.std,
                lo: self.lo,
                hi: self.hi,
                val: self.val,
                sparsity: self.sparsity,
                groups: self.groups,
            },
            seed: self.seed,
            dtype: FloatType::parse(&self.dtype).map_err(|e| anyhow::anyhow!("--dtype: {e}"))?,
            count: self.count,
        })
    }
}

fn print_list() -> anyhow::Result<()> {
    for m in InitMethod::ALL {
        outln!("{:<16} {}", m.name(), m.description())?;
    }
    outln!(
        "{:<16} mimetic attention init: W_Q W_Kᵀ ≈ α₁Z₁ + β₁I, W_V W_O ≈ α₂Z₂ − β₂I (--shape d --heads h)",
        "mimetic"
    )?;
    Ok(())
}

/// Mean, standard deviation (population), min and max.
fn moments(v: &[f64]) -> (f64, f64, f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, var.sqrt(), min, max)
}

/// Runs `orthoformer init`.
pub fn run(args: &InitArgs) -> anyhow::Result<Outcome> {
    if args.list {
        print_list()?;
        return Ok(Outcome::Success);
    }
    let o = args.options()?;
    let is_mimetic = o.method == "mimetic";
    let method = if is_mimetic {
        None
    } else {
        Some(InitMethod::from_name(&o.method)?)
    };
    let dtype = o.dtype;
    if o.count == 0 {
        bail!("--count 0: ask for at least one matrix");
    }
    let mut shape = o.shape.clone().unwrap_or_else(|| vec![o.rows, o.cols]);
    let gain = o.params.gain.unwrap_or(1.0);
    if !gain.is_finite() || gain < 0.0 {
        return Err(orthoformer::init::InitError::BadGain(gain).into());
    }
    orthoformer::init::fan::check_shape(&shape)?;
    if is_mimetic {
        if shape.len() == 2 && shape[0] == shape[1] {
            shape.truncate(1);
        }
        if shape.len() != 1 {
            bail!("mimetic takes --shape d (the model width), got {shape:?}");
        }
    }
    let format = args
        .out
        .as_deref()
        .map(MatrixFormat::from_path)
        .transpose()?;
    let p = &o.params;
    let one = if is_mimetic {
        orthoformer::io::memory::bytes(&[4, shape[0], shape[0]])
    } else {
        orthoformer::io::memory::bytes(&shape)
    };
    // Held at once: every value in f64, their f32-rounded copy (also f64) for the moments
    // and the file's bytes; each matrix's own working memory is checked where it is drawn.
    let total = one.and_then(|n| n.checked_mul(o.count));
    orthoformer::io::memory::check_fits(
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
    let bar = progress_bar(o.count as u64, "init", args.json || o.count < 16);
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
        bar.inc(1);
    }
    bar.finish_and_clear();
    if dtype == FloatType::F32 {
        // Finite in f64 (the library checks that) but beyond f32's range: infinite weights.
        let over = values.iter().filter(|v| !(**v as f32).is_finite()).count();
        if over > 0 {
            bail!(
                "{over} of {} values exceed f32's range (±3.4e38) and would be written as \
                 infinity: use smaller parameters or --dtype f64",
                values.len()
            );
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
    let (mean, std, min, max) = match dtype {
        FloatType::F64 => moments(&values),
        FloatType::F32 => moments(&values.iter().map(|&v| v as f32 as f64).collect::<Vec<_>>()),
    };
    if !(mean.is_finite() && std.is_finite()) {
        bail!(
            "the values are so large that their mean or spread overflows (mean {mean}, std \
             {std}): use smaller parameters"
        );
    }
    if let (Some(path), Some(format)) = (&args.out, format) {
        write_matrix(path, format, dtype, &values, &out_shape).context("cannot write --out")?;
    }
    let report = Report {
        method: o.method.clone(),
        shape: shape.clone(),
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
        out: args.out.as_ref().map(|p| p.display().to_string()),
    };
    if args.json {
        print_json(&report)?;
    } else {
        print_summary(&report)?;
    }
    Ok(Outcome::Success)
}

fn print_summary(r: &Report) -> anyhow::Result<()> {
    let dims: Vec<String> = r.shape.iter().map(|d| d.to_string()).collect();
    let mut line = format!(
        "{} {} {} x{} (seed {}): mean {:.4}, std {:.4}, min {:.4}, max {:.4}",
        r.method,
        dims.join("x"),
        r.dtype,
        r.count,
        r.seed,
        r.mean,
        r.std,
        r.min,
        r.max
    );
    if let Some(e) = r.ortho_error_max {
        line += &format!(
            "; gain {}, {}, max ortho error {:.2e}",
            r.gain,
            if r.haar { "Haar" } else { "not Haar" },
            e
        );
    }
    if let (Some(qk), Some(vo)) = (r.qk_rel_error, r.vo_rel_error) {
        line +=
            &format!("; rel. error W_Q W_Kᵀ {qk:.3e}, W_V W_O {vo:.3e} (wq, wk, wv, wo stacked)");
    }
    line += &format!("; {:.3} ms per matrix", r.ms_per_matrix);
    if let Some(p) = &r.out {
        line += &format!(", written to {p}");
    }
    outln!("{line}")?;
    Ok(())
}
