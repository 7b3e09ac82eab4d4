//! One matrix (or a stack of them) written to a file another tool reads: NumPy `.npy` or a
//! `.safetensors` file holding one tensor named `weight`, in f32 or f64, chosen by the file's
//! extension. Used by `orthoformer init --out`.

use std::path::Path;

use super::FormatError;

/// Element type of the written values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FloatType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

impl FloatType {
    /// Parses `f32` or `f64`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(Self::F32),
            "f64" => Ok(Self::F64),
            other => Err(format!("unknown float type {other:?}: use f32 or f64")),
        }
    }

    /// `f32` or `f64`.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F64 => "f64",
        }
    }
}

/// The file format, from the path's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixFormat {
    /// NumPy `.npy`.
    Npy,
    /// `.safetensors` with one tensor named `weight`.
    Safetensors,
}

impl MatrixFormat {
    /// The format `path`'s extension names (`.npy` or `.safetensors`, any case).
    pub fn from_path(path: &Path) -> Result<Self, FormatError> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "npy" => Ok(Self::Npy),
            "safetensors" => Ok(Self::Safetensors),
            _ => Err(FormatError::UnknownExtension {
                path: path.display().to_string(),
                ext,
                expected: ".npy or .safetensors",
            }),
        }
    }
}

/// Writes `values` (C order, `shape`) to `path` atomically as `format` with elements of type
/// `ty` (f64 values are rounded to nearest when `ty` is f32).
pub fn write_matrix(
    path: &Path,
    format: MatrixFormat,
    ty: FloatType,
    values: &[f64],
    shape: &[usize],
) -> crate::Result<()> {
    match (format, ty) {
        (MatrixFormat::Npy, FloatType::F64) => super::npy::write(path, values, shape),
        (MatrixFormat::Npy, FloatType::F32) => {
            let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
            super::npy::write(path, &v, shape)
        }
        (MatrixFormat::Safetensors, ty) => {
            let (bytes, dtype) = match ty {
                FloatType::F64 => (
                    values
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect::<Vec<u8>>(),
                    safetensors::Dtype::F64,
                ),
                FloatType::F32 => (
                    values
                        .iter()
                        .flat_map(|&v| (v as f32).to_le_bytes())
                        .collect::<Vec<u8>>(),
                    safetensors::Dtype::F32,
                ),
            };
            let malformed = |what: String| FormatError::Malformed {
                path: path.display().to_string(),
                what,
            };
            let view = safetensors::tensor::TensorView::new(dtype, shape.to_vec(), &bytes)
                .map_err(|e| malformed(format!("building the tensor: {e}")))?;
            let file = safetensors::serialize([("weight", view)], None)
                .map_err(|e| malformed(format!("serialising: {e}")))?;
            super::write_atomic_bytes(path, &file)
        }
    }
}
