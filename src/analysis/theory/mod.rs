//! Seed 003 §6 checked by measurement. The seed calls a frozen `d_model x d_k` orthonormal
//! projection an isometry and leans on Johnson-Lindenstrauss; with `d_k < d_model` it is a
//! projection (`||xW||² ≈ (d_k/d_model)||x||²` for a random direction), JL holds only after a
//! `sqrt(d_model/d_k)` rescale and only to the `ε` that `d_k` buys, and independent `W_Q`,
//! `W_K` make `q·k` a random bilinear form of `x, y`, not `x·y`. These functions measure all
//! three on plain matrices (rows are points), so they apply to synthetic inputs and to a
//! trained model's activations alike.

pub(crate) mod activations;
pub(crate) mod correlation;
pub(crate) mod distance;
pub(crate) mod norm;
pub mod plot;
pub mod report;
pub mod run;

pub use correlation::{QkCorrelation, gaussian_qk_correlation, qk_correlation};
pub use distance::{Distortion, distance_distortion, jl_epsilon};
pub use norm::{NormRatio, norm_ratio};

/// What can go wrong in a theory measurement.
#[derive(Debug, thiserror::Error)]
pub enum TheoryError {
    /// Matrix sizes disagree or are empty.
    #[error("theory measurement shape mismatch: {0}")]
    Shape(String),
    /// Drawing a plot failed.
    #[error("drawing the theory plot {path}: {why}")]
    Plot {
        /// The file being drawn.
        path: String,
        /// The backend's message.
        why: String,
    },
}

/// A dense row-major `rows x cols` matrix of `f64` (measurements are done in f64).
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// Row-major entries, `rows * cols` of them.
    pub data: Vec<f64>,
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
}

impl Matrix {
    /// A matrix from row-major `data`; fails if `data.len() != rows * cols` or a side is zero.
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Result<Self, TheoryError> {
        if rows == 0 || cols == 0 || data.len() != rows * cols {
            return Err(TheoryError::Shape(format!(
                "{} entries for a {rows} x {cols} matrix",
                data.len()
            )));
        }
        Ok(Self { data, rows, cols })
    }

    /// A matrix from row-major `f32` data (activations, weights), widened to `f64`.
    pub fn from_f32(rows: usize, cols: usize, data: &[f32]) -> Result<Self, TheoryError> {
        Self::new(rows, cols, data.iter().map(|&x| x as f64).collect())
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Columns `start..start + width` as a new matrix (one head's slice of a projection).
    pub fn columns(&self, start: usize, width: usize) -> Result<Self, TheoryError> {
        if width == 0 || start + width > self.cols {
            return Err(TheoryError::Shape(format!(
                "columns {start}..{} of a matrix with {} columns",
                start + width,
                self.cols
            )));
        }
        let data = (0..self.rows)
            .flat_map(|i| self.row(i)[start..start + width].iter().copied())
            .collect();
        Self::new(self.rows, width, data)
    }

    /// The transpose.
    pub fn transpose(&self) -> Self {
        let mut data = vec![0.0; self.data.len()];
        for i in 0..self.rows {
            for j in 0..self.cols {
                data[j * self.rows + i] = self.data[i * self.cols + j];
            }
        }
        Self {
            data,
            rows: self.cols,
            cols: self.rows,
        }
    }

    /// The product `self · other`, `(n, d) · (d, k) -> (n, k)`.
    pub fn matmul(&self, other: &Matrix) -> Result<Self, TheoryError> {
        if self.cols != other.rows {
            return Err(TheoryError::Shape(format!(
                "({} x {}) times ({} x {})",
                self.rows, self.cols, other.rows, other.cols
            )));
        }
        let (n, k) = (self.rows, other.cols);
        let mut out = vec![0.0; n * k];
        crate::nn::matmul_f64::matmul_f64(&mut out, &self.data, &other.data, n, self.cols, k);
        Self::new(n, k, out)
    }
}

/// Dot product of two equal-length slices.
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Mean and population standard deviation.
pub(crate) fn mean_std(xs: &[f64]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}
