//! The tensor directory's entry: what the reader parses and the validator checks, in a file
//! of its own so that neither imports the other.

use super::dtype::GgmlType;

/// One entry of the tensor directory.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions, innermost (contiguous) first, as GGUF stores them.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ty: GgmlType,
    /// Byte offset from the start of the data section.
    pub offset: u64,
    /// Number of weights (product of `dims`).
    pub n_elements: u64,
}
