//! What `orthoformer init` generates: the method, the shape, how many matrices and in which
//! element type. `Default` holds the command's only defaults.

use super::method::InitParams;
use crate::io::matrix_file::FloatType;

/// The options of `orthoformer init`.
#[derive(Clone, Debug, PartialEq)]
pub struct InitOptions {
    /// Method: an [`super::method::InitMethod`] name, or `mimetic`.
    pub method: String,
    /// Tensor shape; `None`: `rows x cols` (for mimetic, the model width `d`).
    pub shape: Option<Vec<usize>>,
    /// Rows when no shape is given.
    pub rows: usize,
    /// Columns when no shape is given.
    pub cols: usize,
    /// Mimetic: attention heads (must divide the width).
    pub heads: usize,
    /// The method's parameters (`None`: the method's PyTorch default).
    pub params: InitParams,
    /// Seed of matrix 0 (matrix `k` uses `seed + k`).
    pub seed: u64,
    /// Element type of the output (values are computed in f64).
    pub dtype: FloatType,
    /// How many matrices.
    pub count: usize,
}

impl Default for InitOptions {
    /// One Haar-orthogonal 768x64 matrix by QR (seed 000's shape), seed 0, written as f32.
    fn default() -> Self {
        InitOptions {
            method: "qr".into(),
            shape: None,
            rows: 768,
            cols: 64,
            heads: 1,
            params: InitParams::default(),
            seed: 0,
            dtype: FloatType::F32,
            count: 1,
        }
    }
}
