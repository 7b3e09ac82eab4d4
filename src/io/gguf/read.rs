//! Parsing a GGUF file (versions 2 and 3): header, metadata, tensor directory, and tensor data,
//! as stored ([`GgufFile::tensor_data`], [`GgufFile::tensor_bytes`]) or dequantised to f32.
//!
//! The file is memory-mapped (read-only), so opening it reads only the header and metadata,
//! and a model can point its weights at the mapped tensor bytes instead of copying them: the
//! pages are read from the page cache on first use and shared with every other process that
//! maps the file. Where a file cannot be mapped (a pipe, a special file) it is read whole.
//!
//! Every count, length and offset read from the file is checked against the bytes that remain
//! before anything is allocated, so a truncated or hostile file is an error, never a panic or a
//! huge allocation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::budget::{Budget, METADATA_LIMIT};
use super::directory::TensorInfo;
use super::dtype::{GgmlType, dequantize};
use super::keys;
use super::value::Value;
use crate::io::FormatError;

/// The bytes of a GGUF file: mapped, or read into memory.
enum Image {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Image {
    fn bytes(&self) -> &[u8] {
        match self {
            Image::Mapped(m) => m,
            Image::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Image::Mapped(_) => "mapped",
            Image::Owned(_) => "in memory",
        };
        write!(f, "{} bytes {kind}", self.bytes().len())
    }
}

/// A parsed GGUF file; its tensor data stays in the mapped (or read) image.
#[derive(Debug)]
pub struct GgufFile {
    /// Where it was read from (for messages).
    pub path: PathBuf,
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    /// Tensor directory in file order.
    pub tensors: Vec<TensorInfo>,
    image: Arc<Image>,
    data_start: usize,
}

/// One tensor's stored bytes, sharing ownership of the file image, so a model can keep its
/// weights in the mapping after the [`GgufFile`] is dropped.
#[derive(Clone)]
pub struct TensorBytes {
    image: Arc<Image>,
    start: usize,
    len: usize,
}

impl TensorBytes {
    /// The bytes, as stored in the file.
    pub fn bytes(&self) -> &[u8] {
        &self.image.bytes()[self.start..self.start + self.len]
    }

    /// Whether the bytes are in a memory-mapped file (not a heap copy).
    pub fn is_mapped(&self) -> bool {
        matches!(*self.image, Image::Mapped(_))
    }
}

impl std::fmt::Debug for TensorBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TensorBytes({} bytes at {})", self.len, self.start)
    }
}

/// Deepest array nesting accepted (real files use 1).
const MAX_DEPTH: u32 = 4;

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
    path: &'a Path,
    /// Memory the metadata may still take (charged before each allocation).
    budget: Budget,
}

impl<'a> Cursor<'a> {
    fn err(&self, what: impl Into<String>) -> FormatError {
        FormatError::Malformed {
            path: self.path.display().to_string(),
            what: what.into(),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FormatError> {
        if self.b.len() - self.pos < n {
            return Err(self.err(format!(
                "truncated: {what} needs {n} bytes at offset {} but the file has {}",
                self.pos,
                self.b.len()
            )));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N], FormatError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    /// A count that must fit in the remaining bytes at `min_size` bytes per item.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize, FormatError> {
        let n = self.u64(what)?;
        let remaining = (self.b.len() - self.pos) as u64;
        if n.saturating_mul(min_size as u64) > remaining {
            return Err(self.err(format!(
                "truncated or corrupt file: {what} is {n}, more than the {remaining} remaining bytes can hold"
            )));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<String, FormatError> {
        let n = self.count(1, what)?;
        self.budget
            .charge(n as u64, 1, what)
            .map_err(|m| self.err(m))?;
        let s = self.take(n, what)?;
        String::from_utf8(s.to_vec()).map_err(|_| self.err(format!("{what} is not UTF-8")))
    }

    fn value(&mut self, ty: u32, depth: u32) -> Result<Value, FormatError> {
        Ok(match ty {
            0 => Value::U8(self.arr::<1>("u8")?[0]),
            1 => Value::I8(self.arr::<1>("i8")?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.arr("u16")?)),
            3 => Value::I16(i16::from_le_bytes(self.arr("i16")?)),
            4 => Value::U32(self.u32("u32")?),
            5 => Value::I32(i32::from_le_bytes(self.arr("i32")?)),
            6 => Value::F32(f32::from_le_bytes(self.arr("f32")?)),
            7 => Value::Bool(self.arr::<1>("bool")?[0] != 0),
            8 => Value::Str(self.string("string length")?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(self.err("metadata arrays nested too deeply"));
                }
                let elem = self.u32("array type")?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => 12,
                    t => return Err(self.err(format!("unknown metadata type {t}"))),
                };
                let n = self.count(min, "array length")?;
                self.budget
                    .values(n as u64, "array")
                    .map_err(|m| self.err(m))?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.value(elem, depth + 1)?);
                }
                Value::Array(elem, v)
            }
            10 => Value::U64(self.u64("u64")?),
            11 => Value::I64(i64::from_le_bytes(self.arr("i64")?)),
            12 => Value::F64(f64::from_le_bytes(self.arr("f64")?)),
            t => return Err(self.err(format!("unknown metadata type {t}"))),
        })
    }
}

impl GgufFile {
    /// Maps (or, where it cannot be mapped, reads) and parses `path`.
    ///
    /// The file must not be modified or truncated while the returned value, or any
    /// [`TensorBytes`] taken from it, is alive: its pages are read lazily from the mapping
    /// (the same contract as llama.cpp's and safetensors' memory maps).
    pub fn open(path: &Path) -> crate::Result<Self> {
        // Regular files only: a FIFO or a device would block or never end.
        let file = crate::io::safe_file::open_regular(path)?;
        // SAFETY: the map is read-only and only ever read through `&[u8]`; the documented
        // contract above (nobody modifies the file meanwhile) keeps those bytes stable.
        let image = match unsafe { memmap2::Mmap::map(&file) } {
            Ok(m) => Image::Mapped(m),
            Err(_) => {
                drop(file);
                Image::Owned(crate::io::safe_file::read_regular(path)?)
            }
        };
        Ok(Self::parse_image(path, Arc::new(image))?)
    }

    /// Parses a GGUF image already in memory (`path` is used in messages only).
    pub fn parse(path: &Path, bytes: Vec<u8>) -> Result<Self, FormatError> {
        Self::parse_image(path, Arc::new(Image::Owned(bytes)))
    }

    /// [`GgufFile::parse`] with metadata allowed `limit` bytes of memory (the default is
    /// [`METADATA_LIMIT`]), to test the bound on small files.
    pub fn parse_with_limit(path: &Path, bytes: Vec<u8>, limit: u64) -> Result<Self, FormatError> {
        Self::parse_limited(path, Arc::new(Image::Owned(bytes)), limit)
    }

    fn parse_image(path: &Path, image: Arc<Image>) -> Result<Self, FormatError> {
        Self::parse_limited(path, image, METADATA_LIMIT)
    }

    fn parse_limited(path: &Path, image: Arc<Image>, limit: u64) -> Result<Self, FormatError> {
        let bytes = image.bytes();
        let mut c = Cursor {
            b: bytes,
            pos: 0,
            path,
            budget: Budget::new(limit),
        };
        let magic = c.arr::<4>("magic")?;
        if &magic != keys::MAGIC {
            return Err(c.err(format!(
                "not a GGUF file (magic {magic:02x?}, expected \"GGUF\")"
            )));
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(c.err(format!(
                "GGUF version {version} is not supported (2 and 3 are)"
            )));
        }
        // A tensor entry takes at least 8+4+8+4+8 bytes, a metadata entry at least 8+4+1.
        let n_tensors = c.count(32, "tensor count")?;
        let n_kv = c.count(13, "metadata count")?;
        let entry = std::mem::size_of::<(String, Value)>() as u64;
        c.budget
            .charge(n_kv as u64, entry, "entries")
            .map_err(|m| c.err(m))?;
        let mut metadata = Vec::with_capacity(n_kv);
        for _ in 0..n_kv {
            let key = c.string("metadata key")?;
            let ty = c.u32("metadata type")?;
            let v = c.value(ty, 0)?;
            metadata.push((key, v));
        }
        let mut tensors = Vec::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let name = c.string("tensor name")?;
            let nd = c.u32("tensor rank")?;
            if nd == 0 || nd > 4 {
                return Err(c.err(format!("tensor {name}: rank {nd} (expected 1 to 4)")));
            }
            let mut dims = Vec::with_capacity(nd as usize);
            for _ in 0..nd {
                dims.push(c.u64("tensor dimension")?);
            }
            let ty = GgmlType::from_id(c.u32("tensor type")?)
                .map_err(|m| c.err(format!("tensor {name}: {m}")))?;
            let offset = c.u64("tensor offset")?;
            let n_elements = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| c.err(format!("tensor {name}: dimensions {dims:?} overflow")))?;
            tensors.push(TensorInfo {
                name,
                dims,
                ty,
                offset,
                n_elements,
            });
        }
        let alignment = match metadata.iter().find(|(k, _)| k == keys::ALIGNMENT) {
            Some((_, v)) => v
                .as_u64()
                .filter(|a| *a > 0 && a.is_power_of_two())
                .ok_or_else(|| c.err("general.alignment is not a power of two"))?,
            None => keys::DEFAULT_ALIGNMENT,
        };
        let data_start = (c.pos as u64).div_ceil(alignment) * alignment;
        let data_len = (bytes.len() as u64).saturating_sub(data_start);
        for t in &tensors {
            let size = t.ty.byte_size(t.n_elements).ok_or_else(|| {
                c.err(format!(
                    "tensor {}: {} weights is not a whole number of {:?} blocks",
                    t.name, t.n_elements, t.ty
                ))
            })?;
            if t.dims[0] % t.ty.block().0 as u64 != 0 {
                return Err(c.err(format!(
                    "tensor {}: rows of {} are not whole {:?} blocks",
                    t.name, t.dims[0], t.ty
                )));
            }
            let end = t.offset.checked_add(size);
            if end.is_none_or(|e| e > data_len) {
                return Err(c.err(format!(
                    "tensor {} claims bytes {}..{} of the data section, which has only {data_len} \
                     (truncated file?)",
                    t.name,
                    t.offset,
                    t.offset.saturating_add(size)
                )));
            }
        }
        super::validate::check(&metadata, &tensors, alignment).map_err(|m| c.err(m))?;
        let data_start = data_start as usize;
        Ok(GgufFile {
            path: path.to_path_buf(),
            version,
            metadata,
            tensors,
            image,
            data_start,
        })
    }

    fn err(&self, what: impl Into<String>) -> FormatError {
        FormatError::Malformed {
            path: self.path.display().to_string(),
            what: what.into(),
        }
    }

    /// The metadata value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A required unsigned integer.
    pub fn get_u64(&self, key: &str) -> Result<u64, FormatError> {
        self.get(key)
            .ok_or_else(|| self.err(format!("metadata key {key} is missing")))?
            .as_u64()
            .ok_or_else(|| self.err(format!("metadata key {key} is not an unsigned integer")))
    }

    /// A required string.
    pub fn get_str(&self, key: &str) -> Result<&str, FormatError> {
        self.get(key)
            .ok_or_else(|| self.err(format!("metadata key {key} is missing")))?
            .as_str()
            .ok_or_else(|| self.err(format!("metadata key {key} is not a string")))
    }

    /// The directory entry of tensor `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Whether the file is memory-mapped (else it was read into memory).
    pub fn is_mapped(&self) -> bool {
        matches!(*self.image, Image::Mapped(_))
    }

    /// The stored bytes of tensor `t` (an entry of [`GgufFile::tensors`]), bounds-checked.
    pub fn tensor_data(&self, t: &TensorInfo) -> Result<&[u8], FormatError> {
        let (start, len) = self.span(t)?;
        Ok(&self.image.bytes()[start..start + len])
    }

    /// Byte range of `t` in the image, checked to lie inside it.
    fn span(&self, t: &TensorInfo) -> Result<(usize, usize), FormatError> {
        let bad = || self.err(format!("tensor {}: its data lies outside the file", t.name));
        let len = t.ty.byte_size(t.n_elements).ok_or_else(bad)?;
        let start = (self.data_start as u64)
            .checked_add(t.offset)
            .ok_or_else(bad)?;
        let end = start.checked_add(len).ok_or_else(bad)?;
        if end > self.image.bytes().len() as u64 {
            return Err(bad());
        }
        Ok((start as usize, len as usize))
    }

    /// Tensor `name`, checked to have exactly `dims` (innermost first).
    pub fn tensor_checked(&self, name: &str, dims: &[u64]) -> Result<&TensorInfo, FormatError> {
        let t = self
            .tensor(name)
            .ok_or_else(|| self.err(format!("tensor {name} is missing")))?;
        if t.dims != dims {
            return Err(self.err(format!(
                "tensor {name} has dimensions {:?}, the configuration needs {dims:?}",
                t.dims
            )));
        }
        Ok(t)
    }

    /// Tensor `name`'s stored bytes as a handle that shares the file image (no copy), checked
    /// to have exactly `dims`; with its type.
    pub fn tensor_bytes(
        &self,
        name: &str,
        dims: &[u64],
    ) -> Result<(GgmlType, TensorBytes), FormatError> {
        let t = self.tensor_checked(name, dims)?;
        let (start, len) = self.span(t)?;
        Ok((
            t.ty,
            TensorBytes {
                image: Arc::clone(&self.image),
                start,
                len,
            },
        ))
    }

    /// Tensor `name` dequantised to f32 (row-major, innermost dimension contiguous), checked
    /// to have exactly `dims` (innermost first).
    pub fn tensor_f32(&self, name: &str, dims: &[u64]) -> Result<Vec<f32>, FormatError> {
        let t = self.tensor_checked(name, dims)?;
        let raw = self.tensor_data(t)?;
        let mut out = vec![0.0f32; t.n_elements as usize];
        dequantize(t.ty, raw, &mut out);
        Ok(out)
    }
}
