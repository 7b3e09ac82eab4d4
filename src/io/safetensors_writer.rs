//! A safetensors writer whose bytes depend on nothing but its input, streamed to any writer.
//!
//! The format (huggingface/safetensors, `docs/` of that repository): an 8-byte little-endian
//! header length `N`, `N` bytes of JSON
//! `{"__metadata__": {key: value, ...}, name: {"dtype", "shape", "data_offsets": [begin, end]}, ...}`
//! padded with spaces to a multiple of 8, then every tensor's little-endian bytes back to back.
//! The `safetensors` crate builds that header from a `HashMap`, so the metadata order (and the
//! file's bytes and hash) changes from run to run; here the metadata is a `BTreeMap` (sorted by
//! key) and the tensors keep the order they are given, so identical models give identical
//! files. Readers (the `safetensors` crate, Python `safetensors.numpy.load_file`) look tensors
//! up by name and accept any order.
//!
//! A tensor holding NaN or infinity is refused by name before anything is written
//! ([`crate::io::finite::check_holds`]): such a file is a model that computes NaN.

use std::collections::BTreeMap;
use std::io::{self, Write};

/// One F32 tensor to write: its name, its shape (PyTorch order, `out x in` for weights) and
/// its values in row-major order.
#[derive(Clone, Copy, Debug)]
pub struct TensorOut<'a> {
    /// Name in the file.
    pub name: &'a str,
    /// Shape; the product must equal `data.len()`.
    pub shape: &'a [usize],
    /// Values, row-major.
    pub data: &'a [f32],
}

/// The JSON header (padded), without its 8-byte length prefix; an error when a shape does not
/// match its values or a tensor holds a value that is not finite.
pub fn header(
    tensors: &[TensorOut<'_>],
    metadata: &BTreeMap<String, String>,
) -> io::Result<String> {
    for t in tensors {
        crate::io::finite::check_holds(t.name, t.data, crate::io::gguf::GgmlType::F32)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    }
    let entries: Vec<Entry> = tensors
        .iter()
        .map(|t| (t.name, "F32", t.shape, t.data.len(), 4))
        .collect();
    header_of(&entries, metadata)
}

/// A tensor as the header sees it: name, dtype, shape, values given, bytes per value.
type Entry<'a> = (&'a str, &'static str, &'a [usize], usize, usize);

fn header_of(entries: &[Entry<'_>], metadata: &BTreeMap<String, String>) -> io::Result<String> {
    let mut h = String::from("{");
    if !metadata.is_empty() {
        h.push_str("\"__metadata__\":");
        h.push_str(&serde_json::to_string(metadata).map_err(io::Error::other)?);
    }
    let mut offset = 0usize;
    for &(name, dtype, shape, given, width) in entries {
        let numel = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n == given)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("tensor {name} has {given} values but shape {shape:?}"),
                )
            })?;
        let end = offset + width * numel;
        if h.len() > 1 {
            h.push(',');
        }
        let name = serde_json::to_string(name).map_err(io::Error::other)?;
        let shape: Vec<String> = shape.iter().map(usize::to_string).collect();
        h.push_str(&format!(
            "{name}:{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            shape.join(",")
        ));
        offset = end;
    }
    h.push('}');
    // Data starts 8-byte aligned, as the reference writer pads it.
    while !h.len().is_multiple_of(8) {
        h.push(' ');
    }
    Ok(h)
}

/// Writes a safetensors file of F64 tensors `(name, shape, values)` (in this order) and
/// `metadata` (sorted) to `w`; values that are not finite are refused by name.
pub fn write_safetensors_f64(
    w: &mut dyn Write,
    tensors: &[(&str, &[usize], &[f64])],
    metadata: &BTreeMap<String, String>,
) -> io::Result<()> {
    if let Some((name, ..)) = tensors.iter().find(|t| t.2.iter().any(|v| !v.is_finite())) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("tensor {name} holds a value that is not finite"),
        ));
    }
    let entries: Vec<Entry> = tensors
        .iter()
        .map(|&(name, shape, data)| (name, "F64", shape, data.len(), 8))
        .collect();
    let h = header_of(&entries, metadata)?;
    w.write_all(&(h.len() as u64).to_le_bytes())?;
    w.write_all(h.as_bytes())?;
    for (_, _, data) in tensors {
        if cfg!(target_endian = "little") {
            w.write_all(bytemuck::cast_slice(data))?;
        } else {
            for v in *data {
                w.write_all(&v.to_le_bytes())?;
            }
        }
    }
    Ok(())
}

/// Writes a safetensors file of `tensors` (in this order) and `metadata` (sorted) to `w`.
pub fn write_safetensors(
    w: &mut dyn Write,
    tensors: &[TensorOut<'_>],
    metadata: &BTreeMap<String, String>,
) -> io::Result<()> {
    let h = header(tensors, metadata)?;
    w.write_all(&(h.len() as u64).to_le_bytes())?;
    w.write_all(h.as_bytes())?;
    for t in tensors {
        write_f32_le(w, t.data)?;
    }
    Ok(())
}

/// The whole file in memory (for small files and tests).
pub fn to_bytes(
    tensors: &[TensorOut<'_>],
    metadata: &BTreeMap<String, String>,
) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    write_safetensors(&mut out, tensors, metadata)?;
    Ok(out)
}

/// Writes `values` as little-endian f32 without copying them on little-endian machines.
fn write_f32_le(w: &mut dyn Write, values: &[f32]) -> io::Result<()> {
    if cfg!(target_endian = "little") {
        return w.write_all(bytemuck::cast_slice(values));
    }
    for chunk in values.chunks(4096) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.write_all(&bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crate_reads_what_we_write_and_the_bytes_are_stable() {
        let a = [1.0f32, -2.5, 3.25, 0.0, 7.0, 8.0];
        let b = [0.5f32];
        let tensors = [
            TensorOut {
                name: "z.weight",
                shape: &[2, 3],
                data: &a,
            },
            TensorOut {
                name: "a\"odd name",
                shape: &[1],
                data: &b,
            },
        ];
        let mut meta = BTreeMap::new();
        for k in ["zeta", "alpha", "mid", "config"] {
            meta.insert(k.to_string(), format!("{{\"v\": \"{k}\"}}"));
        }
        let bytes = to_bytes(&tensors, &meta).unwrap();
        // Same input, same bytes (a HashMap-built header would differ between processes).
        assert_eq!(bytes, to_bytes(&tensors, &meta).unwrap());
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(n % 8, 0);
        let text = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
        assert!(text.starts_with("{\"__metadata__\":{\"alpha\""), "{text}");
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        assert_eq!(
            header.metadata().as_ref().unwrap()["mid"],
            "{\"v\": \"mid\"}"
        );
        let z = st.tensor("z.weight").unwrap();
        assert_eq!(z.shape(), &[2, 3]);
        assert_eq!(z.data(), bytemuck::cast_slice::<f32, u8>(&a));
        assert_eq!(
            st.tensor("a\"odd name").unwrap().data(),
            &0.5f32.to_le_bytes()
        );
    }

    #[test]
    fn a_shape_that_does_not_match_the_values_is_an_error() {
        let t = [TensorOut {
            name: "x",
            shape: &[usize::MAX, 3],
            data: &[1.0],
        }];
        let e = to_bytes(&t, &BTreeMap::new()).unwrap_err();
        assert!(e.to_string().contains("has 1 values"), "{e}");
    }

    #[test]
    fn a_tensor_that_is_not_finite_is_refused_by_name() {
        for bad in [f32::NAN, f32::INFINITY] {
            let t = [TensorOut {
                name: "h.0.attn.weight",
                shape: &[2],
                data: &[1.0, bad],
            }];
            let mut out = Vec::new();
            let e = write_safetensors(&mut out, &t, &BTreeMap::new()).unwrap_err();
            assert!(
                e.to_string().contains("tensor h.0.attn.weight holds"),
                "{e}"
            );
            assert!(out.is_empty(), "nothing written");
        }
    }
}
