//! `orthoformer init`: generate random orthogonal initial weights, check them, and write them
//! to `.npy` or `.safetensors`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use super::Outcome;
use super::common::{print_json, progress_bar};
use crate::init::orthogonal::{OrthoMethod, ortho_error, orthogonal_f64};

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
    /// Generation method: qr, svd, householder or cayley (see below).
    #[arg(long, default_value = "qr")]
    pub method: String,
    /// Number of rows.
    #[arg(long, default_value_t = 768)]
    pub rows: usize,
    /// Number of columns.
    #[arg(long, default_value_t = 64)]
    pub cols: usize,
    /// Scale of the result: `WᵀW = gain² I`.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub gain: f64,
    /// Random seed (matrix k uses seed + k).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Element type of the output: f32 or f64 (always computed in f64).
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// How many matrices to generate.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// Output file: `.npy` (shape [count, rows, cols], or [rows, cols] when count is 1) or
    /// `.safetensors` (one tensor named `weight` of that shape).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON object instead of the human summary.
    #[arg(long)]
    pub json: bool,
}

/// Output element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

impl Dtype {
    /// Parses `f32` or `f64`.
    pub fn parse(s: &str) -> anyhow::Result<Dtype> {
        match s {
            "f32" => Ok(Dtype::F32),
            "f64" => Ok(Dtype::F64),
            other => bail!("unknown --dtype {other:?}: use f32 or f64"),
        }
    }

    /// `f32` or `f64`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        }
    }
}

/// Where the output goes, decided before any work so a bad path fails fast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Npy,
    Safetensors,
}

fn output_format(path: &Path) -> anyhow::Result<Format> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "npy" => Ok(Format::Npy),
        "safetensors" => Ok(Format::Safetensors),
        _ => Err(crate::io::FormatError::UnknownExtension {
            path: path.display().to_string(),
            ext,
            expected: ".npy or .safetensors",
        }
        .into()),
    }
}

/// The JSON report of one `init` run.
#[derive(Debug, serde::Serialize)]
struct Report {
    method: String,
    rows: usize,
    cols: usize,
    dtype: &'static str,
    count: usize,
    seed: u64,
    gain: f64,
    haar: bool,
    ortho_error_max: f64,
    ms_per_matrix: f64,
    out: Option<String>,
}

/// Runs `orthoformer init`.
pub fn run(args: &InitArgs) -> anyhow::Result<Outcome> {
    let method = OrthoMethod::from_name(&args.method)
        .ok_or_else(|| crate::init::InitError::UnknownMethod(args.method.clone()))?;
    let dtype = Dtype::parse(&args.dtype)?;
    if args.count == 0 {
        bail!("--count 0: ask for at least one matrix");
    }
    crate::init::orthogonal::check_args(args.rows, args.cols, args.gain)?;
    let format = args.out.as_deref().map(output_format).transpose()?;
    let (rows, cols) = (args.rows, args.cols);
    let per = rows
        .checked_mul(cols)
        .and_then(|p| p.checked_mul(args.count))
        .context("the requested output is too large to address")?;
    let bar = progress_bar(args.count as u64, "init", args.json || args.count < 16);
    let mut values = Vec::with_capacity(per);
    let mut err_max: f64 = 0.0;
    let mut gen_secs = 0.0;
    for k in 0..args.count {
        let seed = args.seed.wrapping_add(k as u64);
        let t0 = Instant::now();
        let w = orthogonal_f64(rows, cols, method, args.gain, seed)?;
        gen_secs += t0.elapsed().as_secs_f64();
        let e = match dtype {
            Dtype::F64 => ortho_error(&w, rows, cols, args.gain),
            Dtype::F32 => {
                let w32: Vec<f32> = w.iter().map(|&v| v as f32).collect();
                ortho_error(&w32, rows, cols, args.gain)
            }
        };
        err_max = err_max.max(e);
        values.extend_from_slice(&w);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let shape: Vec<usize> = if args.count == 1 {
        vec![rows, cols]
    } else {
        vec![args.count, rows, cols]
    };
    if let (Some(path), Some(format)) = (&args.out, format) {
        // Flatten the error to one message: the library's I/O error already names its cause.
        write_output(path, format, dtype, &values, &shape)
            .map_err(|e| anyhow::anyhow!("cannot write --out: {e}"))?;
    }
    let report = Report {
        method: method.name().to_string(),
        rows,
        cols,
        dtype: dtype.name(),
        count: args.count,
        seed: args.seed,
        gain: args.gain,
        haar: method.is_haar(),
        ortho_error_max: err_max,
        ms_per_matrix: gen_secs * 1e3 / args.count as f64,
        out: args.out.as_ref().map(|p| p.display().to_string()),
    };
    if args.json {
        print_json(&report)?;
    } else {
        println!(
            "{} {}x{} {} x{} (seed {}, gain {}): {}, max ortho error {:.2e}, {:.3} ms per matrix{}",
            report.method,
            rows,
            cols,
            report.dtype,
            report.count,
            report.seed,
            report.gain,
            if report.haar { "Haar" } else { "not Haar" },
            err_max,
            report.ms_per_matrix,
            report
                .out
                .as_ref()
                .map(|p| format!(", written to {p}"))
                .unwrap_or_default()
        );
    }
    Ok(Outcome::Success)
}

/// Writes `values` (f64, C order) of `shape` to `path` in `format` as `dtype`, atomically.
fn write_output(
    path: &Path,
    format: Format,
    dtype: Dtype,
    values: &[f64],
    shape: &[usize],
) -> anyhow::Result<()> {
    match format {
        Format::Npy => match dtype {
            Dtype::F64 => crate::io::npy::write(path, values, shape)?,
            Dtype::F32 => {
                let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
                crate::io::npy::write(path, &v, shape)?
            }
        },
        Format::Safetensors => {
            let (bytes, st_dtype) = match dtype {
                Dtype::F64 => (
                    values
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect::<Vec<u8>>(),
                    safetensors::Dtype::F64,
                ),
                Dtype::F32 => (
                    values
                        .iter()
                        .flat_map(|&v| (v as f32).to_le_bytes())
                        .collect::<Vec<u8>>(),
                    safetensors::Dtype::F32,
                ),
            };
            let view = safetensors::tensor::TensorView::new(st_dtype, shape.to_vec(), &bytes)
                .context("building the safetensors tensor")?;
            let file = safetensors::serialize([("weight", view)], None)
                .context("serialising safetensors")?;
            crate::io::write_atomic_bytes(path, &file)?;
        }
    }
    Ok(())
}
