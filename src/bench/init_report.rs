//! The report of `orthoformer init-bench` (seed 000's §6 table measured on this machine):
//! per method and shape, the orthogonality error in f32 and f64 and the median milliseconds
//! per matrix, optionally beside PyTorch's `orthogonal_`, `linalg.qr` and `linalg.svd`
//! timed in the same run. Rendered by the one table writer (`io::table`).

use serde::{Deserialize, Serialize};

use crate::init::orthogonal::OrthoMethod;
use crate::io::table::{Align, Block, Report, Table};

/// What `orthoformer init-bench` times; `Default` holds the command's only defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitBenchOptions {
    /// Matrix shapes `(rows, cols)`.
    pub shapes: Vec<(usize, usize)>,
    /// Timed runs per method and shape (the median is reported).
    pub runs: usize,
    /// Methods timed.
    pub methods: Vec<OrthoMethod>,
}

/// The fewest timed runs whose median means something.
pub const MIN_RUNS: usize = 20;

impl Default for InitBenchOptions {
    /// Seed 000's shape 768x64, 25 runs, every method.
    fn default() -> Self {
        InitBenchOptions {
            shapes: vec![(768, 64)],
            runs: 25,
            methods: OrthoMethod::ALL.to_vec(),
        }
    }
}

impl InitBenchOptions {
    /// Checks the options; the error names the flag.
    pub fn validate(&self) -> crate::Result<()> {
        if self.runs < MIN_RUNS {
            return Err(crate::Error::Init(crate::init::InitError::BadParam(
                format!(
                    "`runs` {}: use at least {MIN_RUNS} so the median means something",
                    self.runs
                ),
            )));
        }
        Ok(())
    }
}

/// One method on one shape.
#[derive(Debug, Clone, Serialize)]
pub struct InitBenchRow {
    /// Method name (`qr`, `svd`, `householder`, `cayley`).
    pub method: &'static str,
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Whether the method draws from the Haar measure.
    pub haar: bool,
    /// Largest `‖WᵀW − I‖` (or `WWᵀ` when wide) of the f32-rounded matrices.
    pub ortho_error_f32: f64,
    /// The same in f64.
    pub ortho_error_f64: f64,
    /// Median milliseconds per matrix.
    pub median_ms: f64,
    /// Timed runs.
    pub runs: usize,
}

/// PyTorch's times on one shape (milliseconds, medians).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TorchInitRow {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `torch.nn.init.orthogonal_`.
    pub orthogonal_ms: f64,
    /// `torch.linalg.qr`.
    pub qr_ms: f64,
    /// `torch.linalg.svd`.
    pub svd_ms: f64,
    /// `torch.nn.init.orthogonal_` on a float64 tensor: the accuracy our generators keep.
    pub orthogonal_f64_ms: f64,
}

/// What `scripts/torch_init_bench.py` reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TorchInitReport {
    /// torch version.
    pub torch: String,
    /// Threads torch used.
    pub threads: usize,
    /// dtype timed.
    pub dtype: String,
    /// One row per shape.
    pub shapes: Vec<TorchInitRow>,
}

/// Everything `orthoformer init-bench` reports.
#[derive(Debug, Clone, Serialize)]
pub struct InitBenchReport {
    /// One row per method and shape.
    pub rows: Vec<InitBenchRow>,
    /// PyTorch's times, when asked for and available.
    pub torch: Option<TorchInitReport>,
    /// Why PyTorch was not timed, when asked for.
    pub torch_error: Option<String>,
    /// Our `qr` median over torch's `orthogonal_` median, per shape (below 1 means faster).
    pub qr_over_torch_orthogonal: Vec<f64>,
    /// The same over torch's float64 `orthogonal_`, at equal accuracy.
    pub qr_over_torch_orthogonal_f64: Vec<f64>,
}

impl InitBenchReport {
    /// The report of `rows` with PyTorch's result, the ratios computed.
    pub fn new(rows: Vec<InitBenchRow>, torch: Result<Option<TorchInitReport>, String>) -> Self {
        let (torch, torch_error) = match torch {
            Ok(t) => (t, None),
            Err(e) => (None, Some(e)),
        };
        // Our qr median over one of torch's times, for every shape both timed.
        let ratios = |torch_ms: fn(&TorchInitRow) -> f64| {
            torch.as_ref().map_or_else(Vec::new, |t| {
                t.shapes
                    .iter()
                    .filter_map(|tr| {
                        rows.iter()
                            .find(|r| r.method == "qr" && r.rows == tr.rows && r.cols == tr.cols)
                            .map(|r| r.median_ms / torch_ms(tr))
                    })
                    .collect()
            })
        };
        let qr_over_torch_orthogonal = ratios(|t| t.orthogonal_ms);
        let qr_over_torch_orthogonal_f64 = ratios(|t| t.orthogonal_f64_ms);
        InitBenchReport {
            rows,
            torch,
            torch_error,
            qr_over_torch_orthogonal,
            qr_over_torch_orthogonal_f64,
        }
    }
}

/// Seed 000's own figures (its machine, PyTorch), shown beside ours for 768x64.
fn seed_ms(method: &str, m: usize, n: usize) -> String {
    match (method, m, n) {
        ("qr", 768, 64) => "0.523".into(),
        ("svd", 768, 64) => "2.341".into(),
        ("householder", 768, 64) => "1.876".into(),
        _ => "-".into(),
    }
}

/// Entry `i` of `ratios` as `0.50x`, or `-`.
fn ratio(ratios: &[f64], i: usize) -> String {
    ratios
        .get(i)
        .map_or_else(|| "-".into(), |x| format!("{x:.2}x"))
}

impl Report for InitBenchReport {
    fn blocks(&self) -> Vec<Block> {
        let (l, r) = (Align::Left, Align::Right);
        let mut t = Table::new(&[
            ("method", l),
            ("shape", r),
            ("haar", r),
            ("err f32", r),
            ("err f64", r),
            ("ms (med)", r),
            ("seed ms", r),
        ]);
        for row in &self.rows {
            t.row([
                row.method.to_string(),
                format!("{}x{}", row.rows, row.cols),
                if row.haar { "yes" } else { "no" }.to_string(),
                format!("{:.3e}", row.ortho_error_f32),
                format!("{:.3e}", row.ortho_error_f64),
                format!("{:.3}", row.median_ms),
                seed_ms(row.method, row.rows, row.cols),
            ]);
        }
        let mut out = vec![Block::Table(t)];
        if let Some(tr) = &self.torch {
            let mut p = Table::new(&[
                ("shape", r),
                ("orthogonal_ ms", r),
                ("linalg.qr ms", r),
                ("linalg.svd ms", r),
                ("our qr / orth_", r),
                ("orth_ f64 ms", r),
                ("our qr / orth_ f64", r),
            ])
            .with_title(format!(
                "PyTorch {} ({} threads, {}; orth_ f64 in float64), same run, median of {} runs:",
                tr.torch,
                tr.threads,
                tr.dtype,
                self.rows.first().map_or(0, |x| x.runs)
            ));
            for (i, s) in tr.shapes.iter().enumerate() {
                p.row([
                    format!("{}x{}", s.rows, s.cols),
                    format!("{:.3}", s.orthogonal_ms),
                    format!("{:.3}", s.qr_ms),
                    format!("{:.3}", s.svd_ms),
                    ratio(&self.qr_over_torch_orthogonal, i),
                    format!("{:.3}", s.orthogonal_f64_ms),
                    ratio(&self.qr_over_torch_orthogonal_f64, i),
                ]);
            }
            out.push(Block::Table(p));
        }
        if let Some(e) = &self.torch_error {
            out.push(Block::Text(format!("PyTorch not timed: {e}")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_cells_agree() {
        let row = InitBenchRow {
            method: "qr",
            rows: 768,
            cols: 64,
            haar: true,
            ortho_error_f32: 1.2e-6,
            ortho_error_f64: 3.4e-15,
            median_ms: 0.4,
            runs: 25,
        };
        let torch = TorchInitReport {
            torch: "2.15.0".into(),
            threads: 2,
            dtype: "float32".into(),
            shapes: vec![TorchInitRow {
                rows: 768,
                cols: 64,
                orthogonal_ms: 0.8,
                qr_ms: 0.5,
                svd_ms: 2.0,
                orthogonal_f64_ms: 1.6,
            }],
        };
        let r = InitBenchReport::new(vec![row], Ok(Some(torch)));
        assert_eq!(r.qr_over_torch_orthogonal, vec![0.5]);
        assert_eq!(r.qr_over_torch_orthogonal_f64, vec![0.25]);
        for t in r.tables() {
            t.check().unwrap();
        }
        let text = r.render();
        assert!(
            text.contains("0.523") && text.contains("0.50x") && text.contains("0.25x"),
            "{text}"
        );
        let none = InitBenchReport::new(Vec::new(), Err("no torch".into()));
        assert!(none.render().contains("PyTorch not timed: no torch"));
    }
}
