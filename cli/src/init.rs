//! `orthoformer init`: generate random orthogonal initial weights, check them, and write them
//! to `.npy` or `.safetensors`.

use orthoformer::io::file_set::{Output, check_outputs};
use std::path::PathBuf;

use anyhow::bail;

use super::Outcome;
use super::common::{print_json, progress_bar};
use crate::output::outln;
use orthoformer::init::method::{InitMethod, InitParams};
use orthoformer::init::options::InitOptions;
use orthoformer::init::run::InitReport;
use orthoformer::io::matrix_file::FloatType;

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
        outln!(
            "{:<16} {}",
            m.name(),
            crate::flags::with_flags(m.description())
        )?;
    }
    outln!(
        "{:<16} mimetic attention init: W_Q W_Kᵀ ≈ α₁Z₁ + β₁I, W_V W_O ≈ α₂Z₂ − β₂I (--shape d --heads h)",
        "mimetic"
    )?;
    Ok(())
}

/// Runs `orthoformer init`.
pub fn run(args: &InitArgs) -> anyhow::Result<Outcome> {
    if args.list {
        print_list()?;
        return Ok(Outcome::Success);
    }
    let o = args.options()?;
    // Checked, not locked: the file is written whole by one rename, and its folder must
    // already exist (a lock would create it).
    if let Some(p) = args.out.as_deref() {
        check_outputs(&[], &[Output::file("out", p)])?;
    }
    // The library checks and draws; the command line shows a bar and prints the report.
    let bar = progress_bar(o.count as u64, "init", args.json || o.count < 16);
    let report =
        orthoformer::init::run::run(&o, args.out.as_deref(), &mut |k| bar.set_position(k as u64))?
            .report;
    bar.finish_and_clear();
    if args.json {
        print_json(&report)?;
    } else {
        print_summary(&report)?;
    }
    Ok(Outcome::Success)
}

fn print_summary(r: &InitReport) -> anyhow::Result<()> {
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
