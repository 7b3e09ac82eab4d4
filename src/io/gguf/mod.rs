//! GGUF files: header and metadata parsing, tensor dequantisation, and writing.
