//! `orthoformer init-bench`: seed 000's §6 table measured on this machine. For each method
//! and shape: the orthogonality error in f32 and f64 and the median milliseconds per matrix;
//! with `--torch`, PyTorch's `orthogonal_` (float32, and float64 as our generators compute),
//! `linalg.qr` and `linalg.svd` timed in the same run by `scripts/torch_init_bench.py`.

use std::path::PathBuf;
use std::process::Command;

use super::Outcome;
use super::common::{PYTHON, emit, progress_bar};
use orthoformer::bench::init_bench;
use orthoformer::bench::init_report::{InitBenchOptions, InitBenchReport, TorchInitReport};
use orthoformer::init::orthogonal::OrthoMethod;

/// Flags of `orthoformer init-bench`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The seed's figures (its own machine, PyTorch): qr 0.523 ms, svd 2.341 ms, \
householder 1.876 ms for 768x64.\ncayley is orthogonal but not Haar-distributed."
)]
pub struct InitBenchArgs {
    /// Matrix shape `MxN`; repeat for several.
    #[arg(
        long = "shape",
        value_name = "MxN",
        default_values_t = InitBenchOptions::default().shapes.iter().map(|(m, n)| format!("{m}x{n}"))
    )]
    pub shapes: Vec<String>,
    /// Timed runs per method and shape (the median is reported; at least 20).
    #[arg(long, default_value_t = InitBenchOptions::default().runs)]
    pub runs: usize,
    /// Methods to time; repeat for several.
    #[arg(
        long = "method",
        value_name = "METHOD",
        default_values_t = InitBenchOptions::default().methods.iter().map(|m| m.name().to_string())
    )]
    pub methods: Vec<String>,
    /// Also time PyTorch in the same run (needs python3 with torch).
    #[arg(long)]
    pub torch: bool,
    /// The Python interpreter for `--torch`.
    #[arg(long, default_value = PYTHON)]
    pub python: String,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Parses `MxN` into `(m, n)`, both at least 1.
pub fn parse_shape(s: &str) -> anyhow::Result<(usize, usize)> {
    let bad = || anyhow::anyhow!("bad --shape {s:?}: write it as MxN with M, N >= 1, e.g. 768x64");
    let (a, b) = s
        .to_lowercase()
        .split_once('x')
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .ok_or_else(bad)?;
    let m: usize = a.trim().parse().map_err(|_| bad())?;
    let n: usize = b.trim().parse().map_err(|_| bad())?;
    if m == 0 || n == 0 {
        return Err(bad());
    }
    Ok((m, n))
}

/// Runs the PyTorch script; `Err` carries a message to print instead of its table.
fn run_torch(
    python: &str,
    shapes: &[(usize, usize)],
    runs: usize,
) -> Result<TorchInitReport, String> {
    // The repository's script (this crate lives in `cli/`, the scripts one level up).
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/torch_init_bench.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script).arg("--runs").arg(runs.to_string());
    for (m, n) in shapes {
        cmd.arg("--shape").arg(format!("{m}x{n}"));
    }
    let out = cmd.output().map_err(|e| {
        format!(
            "cannot run {python} {}: {e} (needs python3 with torch: pip install torch)",
            script.display()
        )
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(stdout.trim())
        && let Some(e) = v.get("error").and_then(|e| e.as_str())
    {
        return Err(format!("{e} (to compare with PyTorch: pip install torch)"));
    }
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "the PyTorch script failed ({}): {} (is torch installed? pip install torch)",
            out.status,
            err.lines().last().unwrap_or("")
        ));
    }
    serde_json::from_str(stdout.trim()).map_err(|e| format!("unreadable PyTorch output: {e}"))
}

impl InitBenchArgs {
    /// The library's options these flags ask for (shapes and names checked).
    pub fn options(&self) -> anyhow::Result<InitBenchOptions> {
        Ok(InitBenchOptions {
            shapes: self
                .shapes
                .iter()
                .map(|s| parse_shape(s))
                .collect::<anyhow::Result<_>>()?,
            runs: self.runs,
            methods: self
                .methods
                .iter()
                .map(|m| {
                    OrthoMethod::from_name(m).ok_or_else(|| {
                        anyhow::anyhow!(
                            "unknown --method {m:?}: use qr, svd, householder or cayley"
                        )
                    })
                })
                .collect::<anyhow::Result<_>>()?,
        })
    }
}

/// Runs `orthoformer init-bench`.
pub fn run(args: &InitBenchArgs) -> anyhow::Result<Outcome> {
    let opts = args.options()?;
    let bar = progress_bar(
        (opts.shapes.len() * opts.methods.len()) as u64,
        "init-bench",
        args.json,
    );
    let rows = init_bench::time_methods(&opts, &mut |label, done| {
        bar.set_prefix(label.to_string());
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    let (shapes, runs) = (&opts.shapes, opts.runs);
    let torch = if args.torch {
        if !args.json {
            crate::output::warn_ln!("timing PyTorch ({})...", args.python);
        }
        run_torch(&args.python, shapes, runs).map(Some)
    } else {
        Ok(None)
    };
    let report = InitBenchReport::new(rows, torch);
    emit(&report, args.json)?;
    Ok(Outcome::Success)
}
