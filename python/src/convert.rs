//! Arrays across the boundary: little-endian bytes in (`bytes`, read without a copy by PyO3),
//! `bytearray` out (filled once, viewed by `numpy.frombuffer` without another copy), and the
//! size checks that come before any allocation a caller controls.

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use crate::error::value;

/// `values` as a `bytearray` of little-endian f32.
pub(crate) fn f32_out<'py>(py: Python<'py>, values: &[f32]) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_with(py, values.len() * 4, |buf| {
        for (dst, v) in buf.chunks_exact_mut(4).zip(values) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })
}

/// `values` as a `bytearray` of little-endian f64.
pub(crate) fn f64_out<'py>(py: Python<'py>, values: &[f64]) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_with(py, values.len() * 8, |buf| {
        for (dst, v) in buf.chunks_exact_mut(8).zip(values) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })
}

/// `values` as a `bytearray` of little-endian u32.
pub(crate) fn u32_out<'py>(py: Python<'py>, values: &[u32]) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_with(py, values.len() * 4, |buf| {
        for (dst, v) in buf.chunks_exact_mut(4).zip(values) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    })
}

/// Little-endian f32 bytes as values; `expected` (when given) is the required count.
pub(crate) fn f32_in(bytes: &[u8], what: &str, expected: Option<usize>) -> PyResult<Vec<f32>> {
    let n = count(bytes, 4, what, expected)?;
    let mut out = Vec::with_capacity(n);
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    Ok(out)
}

/// Little-endian f64 bytes as values.
pub(crate) fn f64_in(bytes: &[u8], what: &str, expected: Option<usize>) -> PyResult<Vec<f64>> {
    let n = count(bytes, 8, what, expected)?;
    let mut out = Vec::with_capacity(n);
    out.extend(
        bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
    );
    Ok(out)
}

/// Little-endian u32 bytes (token ids) as values.
pub(crate) fn u32_in(bytes: &[u8], what: &str, expected: Option<usize>) -> PyResult<Vec<u32>> {
    let n = count(bytes, 4, what, expected)?;
    let mut out = Vec::with_capacity(n);
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    Ok(out)
}

fn count(bytes: &[u8], width: usize, what: &str, expected: Option<usize>) -> PyResult<usize> {
    if !bytes.len().is_multiple_of(width) {
        return Err(value(format!(
            "{what}: {} bytes is not a whole number of {width}-byte values",
            bytes.len()
        )));
    }
    let n = bytes.len() / width;
    match expected {
        Some(e) if e != n => Err(value(format!("{what}: {n} values, expected {e}"))),
        _ => Ok(n),
    }
}

/// The number of elements of `shape`, checked: no overflow, and an allocation of that many
/// `elem_bytes`-byte values the system agrees to make (else `MemoryError`).
pub(crate) fn checked_numel(shape: &[usize], elem_bytes: usize) -> PyResult<usize> {
    let n = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .and_then(|n| n.checked_mul(elem_bytes).map(|_| n))
        .filter(|&n| n.saturating_mul(elem_bytes) <= isize::MAX as usize)
        .ok_or_else(|| {
            value(format!(
                "shape {shape:?} has more elements than memory can address"
            ))
        })?;
    let mut probe: Vec<u8> = Vec::new();
    probe.try_reserve_exact(n * elem_bytes).map_err(|_| {
        PyMemoryError::new_err(format!(
            "shape {shape:?} needs {} bytes, more than this machine can allocate",
            n * elem_bytes
        ))
    })?;
    Ok(n)
}

/// `b x t` token count, checked.
pub(crate) fn batch_len(b: usize, t: usize) -> PyResult<usize> {
    b.checked_mul(t)
        .ok_or_else(|| value(format!("batch {b} x {t} is too large")))
}
