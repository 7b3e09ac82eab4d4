//! GGUF files: header and metadata parsing, tensor dequantisation (F32, F16, BF16, Q8_0,
//! Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS), and writing (F32, F16).

pub mod blocks;
pub(crate) mod budget;
pub(crate) mod directory;
pub mod dtype;
pub(crate) mod iquants;
pub(crate) mod keys;
pub(crate) mod kquants;
pub(crate) mod le;
pub mod provenance;
pub(crate) mod read;
pub(crate) mod validate;
pub(crate) mod value;
pub(crate) mod write;

pub use directory::TensorInfo;
pub use dtype::GgmlType;
pub use read::{GgufFile, TensorBytes};
pub use value::Value;
pub use write::{RawTensor, TensorOut, stored_type, write_gguf, write_gguf_raw};
