//! Writing GGUF version 3 files atomically: F32 or F16 tensors from f32 data, or tensors
//! already encoded in a block format by a quantiser ([`write_gguf_raw`]).
//!
//! As llama.cpp's own converters (`convert_hf_to_gguf.py`: `n_dims <= 1` stays F32), a
//! one-dimensional tensor (norm weights, biases) is always stored F32, whatever type the
//! matrices get: llama.cpp's kernels read norms as F32, and an F16 norm corrupts its output.
//!
//! Nothing that is not finite is written: every tensor is checked against the type it is
//! stored as before the file is begun ([`crate::io::finite`]: a NaN, an infinity, an f32
//! beyond f16's 65504, a block whose f16 scale overflowed), and the file is refused naming
//! the tensor.

use std::io::Write;
use std::path::Path;

use half::f16;

use super::dtype::GgmlType;
use super::keys;
use super::value::Value;
use crate::Error;
use crate::io::finite::{check_blocks, check_holds};

/// A tensor to write: name, dims (innermost first, GGUF order), data in row-major order.
pub struct TensorOut<'a> {
    /// Tensor name.
    pub name: String,
    /// Dimensions, innermost first.
    pub dims: Vec<u64>,
    /// Weights, `product(dims)` of them.
    pub data: &'a [f32],
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

fn put_value(buf: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => buf.push(*x),
        Value::I8(x) => buf.push(*x as u8),
        Value::U16(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => buf.push(u8::from(*x)),
        Value::Str(s) => put_str(buf, s),
        Value::Array(t, items) => {
            buf.extend_from_slice(&t.to_le_bytes());
            buf.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for i in items {
                put_value(buf, i);
            }
        }
        Value::U64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => buf.extend_from_slice(&x.to_le_bytes()),
    }
}

/// The type a tensor of `dims` is stored as when the file's matrices are `ty`: F32 for a
/// one-dimensional tensor, `ty` otherwise (llama.cpp's converter rule).
pub fn stored_type(ty: GgmlType, dims: &[u64]) -> GgmlType {
    if dims.len() <= 1 { GgmlType::F32 } else { ty }
}

/// The tensor-data alignment `metadata` asks for: `general.alignment` when it is a power of
/// two from 8 to 65536 (llama.cpp requires a power of two), else the default 32.
fn alignment(metadata: &[(String, Value)]) -> u64 {
    metadata
        .iter()
        .find(|(k, _)| k == keys::ALIGNMENT)
        .and_then(|(_, v)| v.as_u64())
        .filter(|a| a.is_power_of_two() && (8..=65536).contains(a))
        .unwrap_or(keys::DEFAULT_ALIGNMENT)
}

/// A tensor already in its stored form: name, dims (innermost first), ggml type id and the
/// bytes of that type (row-major blocks), e.g. a quantiser's `Q4_K` blocks.
pub struct RawTensor<'a> {
    /// Tensor name.
    pub name: String,
    /// Dimensions, innermost first.
    pub dims: Vec<u64>,
    /// ggml type id (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 8 Q8_0, 12 Q4_K).
    pub type_id: u32,
    /// The stored bytes.
    pub bytes: &'a [u8],
}

/// The refusal of a file at `path`: `what` is wrong, nothing is written.
fn malformed(path: &Path, what: String) -> Error {
    crate::io::FormatError::Malformed {
        path: path.display().to_string(),
        what,
    }
    .into()
}

/// One tensor's header entry: name, dims, type id, stored bytes.
type Entry<'a> = (&'a str, &'a [u64], u32, u64);

/// The header (metadata, tensor infos, padding) and the writer of the data that follows:
/// `emit(i, buf)` appends tensor `i`'s bytes to `buf`.
fn write_with(
    path: &Path,
    metadata: &[(String, Value)],
    entries: &[Entry<'_>],
    mut emit: impl FnMut(usize, &mut Vec<u8>),
) -> crate::Result<()> {
    let align = alignment(metadata);
    let mut head = Vec::new();
    head.extend_from_slice(keys::MAGIC);
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let meta: Vec<&(String, Value)> = metadata
        .iter()
        .filter(|(k, v)| k != keys::ALIGNMENT || v.as_u64() == Some(align))
        .collect();
    head.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    for (k, v) in meta {
        put_str(&mut head, k);
        head.extend_from_slice(&v.type_id().to_le_bytes());
        put_value(&mut head, v);
    }
    let mut offset = 0u64;
    for (name, dims, ty, size) in entries {
        put_str(&mut head, name);
        head.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in *dims {
            head.extend_from_slice(&d.to_le_bytes());
        }
        head.extend_from_slice(&ty.to_le_bytes());
        head.extend_from_slice(&offset.to_le_bytes());
        offset = (offset + size).div_ceil(align) * align;
    }
    let pad = |n: usize| (n as u64).div_ceil(align) * align - n as u64;
    head.extend(std::iter::repeat_n(0u8, pad(head.len()) as usize));
    crate::io::write_atomic(path, |w| {
        let io = |e| Error::io(path, e);
        w.write_all(&head).map_err(io)?;
        let mut chunk = Vec::new();
        for i in 0..entries.len() {
            chunk.clear();
            emit(i, &mut chunk);
            let p = pad(chunk.len()) as usize;
            chunk.extend(std::iter::repeat_n(0u8, p));
            w.write_all(&chunk).map_err(io)?;
        }
        Ok(())
    })
}

/// Writes a GGUF v3 file of tensors already in their stored types (see [`RawTensor`]); each
/// tensor's bytes must be exactly its dims' worth of whole blocks and decode to finite
/// values, else nothing is written.
pub fn write_gguf_raw(
    path: &Path,
    metadata: &[(String, Value)],
    tensors: &[RawTensor<'_>],
) -> crate::Result<()> {
    let mut entries = Vec::with_capacity(tensors.len());
    for t in tensors {
        let n: u64 = t.dims.iter().product();
        // The block sizes are the reader's: one table of the formats (`GgmlType::block`).
        let size = GgmlType::from_id(t.type_id)
            .ok()
            .map(|ty| ty.block())
            .filter(|&(per, _)| t.dims.first().is_some_and(|d| d % per as u64 == 0))
            .map(|(per, bytes)| n / per as u64 * bytes as u64);
        if size != Some(t.bytes.len() as u64) {
            return Err(crate::io::FormatError::Malformed {
                path: path.display().to_string(),
                what: format!(
                    "tensor {} of type id {} and dims {:?} cannot hold {} bytes",
                    t.name,
                    t.type_id,
                    t.dims,
                    t.bytes.len()
                ),
            }
            .into());
        }
        let ty = GgmlType::from_id(t.type_id).map_err(|e| malformed(path, e))?;
        check_blocks(&t.name, t.bytes, ty).map_err(|e| malformed(path, e))?;
        entries.push((
            t.name.as_str(),
            t.dims.as_slice(),
            t.type_id,
            t.bytes.len() as u64,
        ));
    }
    write_with(path, metadata, &entries, |i, buf| {
        buf.extend_from_slice(tensors[i].bytes)
    })
}

/// Writes a GGUF v3 file: every `metadata` entry in order (a `general.alignment` that is not a
/// power of two from 8 to 65536 is dropped and the default 32 used) and `tensors`, matrices
/// stored as `ty` (F32 or F16) and one-dimensional tensors as F32 ([`stored_type`]). A
/// tensor its stored type cannot hold (NaN, infinity, beyond f16's range) is refused by name
/// and nothing is written.
pub fn write_gguf(
    path: &Path,
    metadata: &[(String, Value)],
    tensors: &[TensorOut<'_>],
    ty: GgmlType,
) -> crate::Result<()> {
    if !matches!(ty, GgmlType::F32 | GgmlType::F16) {
        return Err(crate::io::FormatError::Malformed {
            path: path.display().to_string(),
            what: format!("writing {ty:?} tensors is not supported (F32 or F16 only)"),
        }
        .into());
    }
    let entries: Vec<Entry<'_>> = tensors
        .iter()
        .map(|t| {
            let t_ty = stored_type(ty, &t.dims);
            check_holds(&t.name, t.data, t_ty).map_err(|e| malformed(path, e))?;
            let size = t_ty.byte_size(t.data.len() as u64).unwrap_or(0);
            Ok((t.name.as_str(), t.dims.as_slice(), t_ty.id(), size))
        })
        .collect::<crate::Result<_>>()?;
    write_with(path, metadata, &entries, |i, chunk| {
        let t = &tensors[i];
        match stored_type(ty, &t.dims) {
            GgmlType::F16 => {
                for x in t.data {
                    chunk.extend_from_slice(&f16::from_f32(*x).to_le_bytes());
                }
            }
            _ => chunk.extend_from_slice(bytemuck::cast_slice(t.data)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("of-gguf-write-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn what_the_stored_type_cannot_hold_is_refused_and_nothing_written() {
        let dir = scratch("holds");
        let p = dir.join("m.gguf");
        let t = |name: &str, data: &'static [f32]| TensorOut {
            name: name.into(),
            dims: vec![2, 1],
            data,
        };
        for (data, ty, want) in [
            (&[1.0, f32::NAN][..], GgmlType::F32, "holds NaN"),
            (&[f32::INFINITY, 1.0][..], GgmlType::F16, "holds inf"),
            (&[65520.0, 1.0][..], GgmlType::F16, "65504"),
        ] {
            let e = write_gguf(&p, &[], &[t("blk.0.attn_q.weight", data)], ty).unwrap_err();
            let e = e.to_string();
            assert!(e.contains("blk.0.attn_q.weight") && e.contains(want), "{e}");
            assert!(!p.exists(), "{e}");
        }
        // 65519 rounds to f16's 65504: held. A one-dimensional tensor is stored F32.
        write_gguf(&p, &[], &[t("a", &[65519.0, 1.0])], GgmlType::F16).unwrap();
        let norm = TensorOut {
            name: "n".into(),
            dims: vec![2],
            data: &[1e9, 1.0],
        };
        write_gguf(&p, &[], &[norm], GgmlType::F16).unwrap();
        // A Q8_0 block whose f16 scale is infinity.
        std::fs::remove_file(&p).unwrap();
        let mut raw = half::f16::INFINITY.to_le_bytes().to_vec();
        raw.extend([3u8; 32]);
        let e = write_gguf_raw(
            &p,
            &[],
            &[RawTensor {
                name: "output.weight".into(),
                dims: vec![32, 1],
                type_id: 8,
                bytes: &raw,
            }],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("output.weight") && e.contains("Q8_0"), "{e}");
        assert!(!p.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
