//! Matrix-vector products `y = W·x` that read a weight in its GGUF storage type (F32, F16,
//! BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS) in place: each block
//! is dequantised in registers and multiplied into f32 activations with fused multiply-adds,
//! so decoding from a quantised model streams its bytes (4.25 to 8.5 bits a weight) instead
//! of an f32 copy four to seven times larger.
//!
//! Every weight is dequantised to exactly the value [`dequantize`] gives (`d·q`, `d·(q−8)`,
//! `d·q + m`, `d·k[q]` in f32, not fused), so a product differs from the dequantise-then-f32
//! product only in the order of its sums. The activations stay f32 unless
//! [`MatvecInput::Q8`] asks for llama.cpp's way, activations rounded to 8 bits for integer dot
//! products (`q8.rs`), which moves the logits slightly.
//!
//! Bodies: AVX-512 and AVX2 (`std::arch` intrinsics, F16C for the f16 scales) and a portable
//! one (the super-block types, the 5-bit types, IQ4_NL and BF16 have AVX2 bodies, which the
//! AVX-512 level also runs), chosen per call by [`simd::isa`] (tests force each with
//! [`simd::with_isa`]). Rows are split over rayon; each row is one task's work from start to
//! end, so the result does not depend on the thread count.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_iq4;
#[cfg(target_arch = "x86_64")]
mod avx2_k;
#[cfg(target_arch = "x86_64")]
mod avx2_lanes;
#[cfg(target_arch = "x86_64")]
mod avx2_q5;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod q8;
mod q8_k;
mod q8_vector;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86_q8;
#[cfg(target_arch = "x86_64")]
mod x86_q8_k;
#[cfg(target_arch = "x86_64")]
mod x86_q8_lanes;

use rayon::prelude::*;

use super::simd::{self, Isa};
use crate::io::gguf::GgmlType;
pub use crate::io::gguf::dtype::dequantize;
pub use q8::supports as q8_supports;
pub use q8_vector::{Q8Row, Q8Vector};

/// What a matrix-vector product multiplies quantised weights with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatvecInput {
    /// The f32 activations, exactly (each weight dequantised in registers).
    #[default]
    F32,
    /// The activations rounded to 8 bits per block of 32, multiplied in integers with Q8_0,
    /// Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K weights ([`Q8Vector`]), as llama.cpp
    /// does; other types (IQ4_NL, IQ4_XS, F16, BF16, F32) read f32. Only products of one or
    /// two rows (a decode step) round their input: longer prompts and evaluation windows go
    /// through the f32 panel products, which are faster where the f32 GEMM outruns these
    /// integer kernels (AVX2 without VNNI; docs/BENCHMARKS.md).
    Q8,
    /// [`Q8`](Self::Q8) in every product, prompts and evaluation windows included: each row is
    /// rounded alone and multiplied by the decode kernel, so a prompt row's products equal
    /// those of a decode step on the same input (`eval --dot q8-all` measures the perplexity of
    /// `q8`'s arithmetic).
    Q8All,
}

impl MatvecInput {
    /// The names `FromStr` accepts, in order.
    pub const NAMES: [&'static str; 3] = ["f32", "q8", "q8-all"];

    /// The name `FromStr` accepts.
    pub fn name(self) -> &'static str {
        match self {
            MatvecInput::F32 => "f32",
            MatvecInput::Q8 => "q8",
            MatvecInput::Q8All => "q8-all",
        }
    }
}

impl std::str::FromStr for MatvecInput {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(MatvecInput::F32),
            "q8" => Ok(MatvecInput::Q8),
            "q8-all" => Ok(MatvecInput::Q8All),
            _ => Err(format!(
                "`dot` {s:?} is not a dot-product input: use one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl serde::Serialize for MatvecInput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for MatvecInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Rows per rayon work item (rayon's adaptive splitting groups them further).
const ROWS: usize = 16;

/// A row-major `rows x cols` weight (`out x in`, so `y = W·x`) in a GGUF storage type: each
/// row is `cols / block` whole blocks, `row_bytes()` bytes.
#[derive(Clone, Copy, Debug)]
pub struct QMatrix<'a> {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: &'a [u8],
}

impl<'a> QMatrix<'a> {
    /// A view of `data` as a `rows x cols` matrix of `ty`. `None` when a row is not a whole
    /// number of blocks, `data` is not exactly `rows` rows long, or F32 data is not aligned
    /// to 4 bytes.
    pub fn new(ty: GgmlType, rows: usize, cols: usize, data: &'a [u8]) -> Option<Self> {
        let (per, bytes) = ty.block();
        if !cols.is_multiple_of(per) {
            return None;
        }
        let len = (cols / per).checked_mul(bytes)?.checked_mul(rows)?;
        let aligned = ty != GgmlType::F32 || data.as_ptr().align_offset(4) == 0;
        (data.len() == len && aligned).then_some(QMatrix {
            ty,
            rows,
            cols,
            data,
        })
    }

    /// An f32 matrix (`w.len() == rows·cols`, else `None`).
    pub fn from_f32(w: &'a [f32], rows: usize, cols: usize) -> Option<Self> {
        Self::new(GgmlType::F32, rows, cols, bytemuck::cast_slice(w))
    }

    /// Storage type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Rows (outputs).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (inputs).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        let (per, bytes) = self.ty.block();
        self.cols / per * bytes
    }

    /// The stored bytes (`rows · row_bytes()`).
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// Rows `r` of the matrix.
    pub fn slice_rows(&self, r: std::ops::Range<usize>) -> QMatrix<'a> {
        let rb = self.row_bytes();
        QMatrix {
            rows: r.len(),
            data: &self.data[r.start * rb..r.end * rb],
            ..*self
        }
    }

    /// The weights as f32 when stored as F32.
    pub fn as_f32(&self) -> Option<&'a [f32]> {
        // Alignment and length were checked in `new`.
        (self.ty == GgmlType::F32).then(|| bytemuck::cast_slice(self.data))
    }
}

/// `y = W·x` (`y`: `rows`, `x`: `cols`), rows split over the rayon pool.
pub fn matvec(y: &mut [f32], w: QMatrix, x: &[f32]) {
    check(y, &w, x);
    y.par_chunks_mut(ROWS).enumerate().for_each(|(i, yc)| {
        let r0 = i * ROWS;
        matvec_rows(yc, w.slice_rows(r0..r0 + yc.len()), x);
    });
}

/// Several products of one input at once (`y_j = W_j·x`, e.g. Q, K and V of one normed
/// activation): one parallel region instead of one per matrix.
pub fn matvec_many(jobs: &mut [(&mut [f32], QMatrix)], x: &[f32]) {
    for (y, w) in jobs.iter() {
        check(y, w, x);
    }
    for_each_chunk(jobs, |yc, ws| matvec_rows(yc, ws, x));
}

/// `f(y rows, their weight rows)` for every chunk of [`ROWS`] rows of every job, all in one
/// parallel region.
fn for_each_chunk(jobs: &mut [(&mut [f32], QMatrix)], f: impl Fn(&mut [f32], QMatrix) + Sync) {
    jobs.par_iter_mut().for_each(|(y, w)| {
        let w = *w;
        y.par_chunks_mut(ROWS).enumerate().for_each(|(i, yc)| {
            let r0 = i * ROWS;
            f(yc, w.slice_rows(r0..r0 + yc.len()));
        });
    });
}

/// [`matvec_many`] with the input `input`: for [`MatvecInput::Q8`] (or `Q8All`), `x` is rounded once into
/// `scratch` (whose buffers only grow, so a steady decode allocates nothing) and every weight
/// [`q8_supports`] takes multiplies it in integers.
pub fn matvec_many_with(
    jobs: &mut [(&mut [f32], QMatrix)],
    x: &[f32],
    input: MatvecInput,
    scratch: &mut Q8Vector,
) {
    let any_q8 = jobs.iter().any(|(_, w)| q8::supports(w.ty));
    if input == MatvecInput::F32 || !any_q8 || !x.len().is_multiple_of(q8_vector::BLOCK) {
        matvec_many(jobs, x);
        return;
    }
    for (y, w) in jobs.iter() {
        check(y, w, x);
    }
    scratch.quantize(x);
    let xq = &*scratch;
    for_each_chunk(jobs, |yc, ws| {
        if q8::supports(ws.ty) {
            matvec_rows_q8(yc, ws, xq);
        } else {
            matvec_rows(yc, ws, x);
        }
    });
}

/// `y = W·x` on the calling thread with `x` rounded ([`Q8Vector`]); `W`'s type must be one
/// [`q8_supports`] takes.
pub fn matvec_rows_q8(y: &mut [f32], w: QMatrix, x: &Q8Vector) {
    matvec_row_q8(y, w, x.whole());
}

/// [`matvec_rows_q8`] with one row of a [`Q8Vector`] that holds several.
pub fn matvec_row_q8(y: &mut [f32], w: QMatrix, x: Q8Row) {
    assert!(
        y.len() == w.rows && x.len() == w.cols && q8::supports(w.ty),
        "matvec_q8: y {} x {} for a {}x{} {:?} matrix",
        y.len(),
        x.len(),
        w.rows,
        w.cols,
        w.ty
    );
    match simd::isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa` reports AVX-512 only when the CPU has it, and VNNI is checked here;
        // shapes checked above.
        Isa::Avx512 if simd::has_avx512_vnni() => unsafe {
            x86_q8::vnni::matvec(w.ty, w.data, w.cols, &[x], &mut [y])
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512 CPUs have AVX2/FMA/F16C, and so do the CPUs `isa` reports AVX2 on.
        Isa::Avx512 | Isa::Avx2 => unsafe {
            x86_q8::avx2::matvec(w.ty, w.data, w.cols, &[x], &mut [y])
        },
        _ => q8::matvec(w.ty, w.data, w.cols, x, y),
    }
}

/// [`matvec_row_q8`] of four rounded rows at once (a batch's or a prompt's rows): each
/// weight block is unpacked once for the four, and `ys[j]` equals `matvec_row_q8` of
/// `xs[j]` alone, bit for bit.
pub fn matvec4_row_q8(ys: [&mut [f32]; 4], w: QMatrix, xs: [Q8Row; 4]) {
    for (y, x) in ys.iter().zip(&xs) {
        assert!(
            y.len() == w.rows && x.len() == w.cols && q8::supports(w.ty),
            "matvec4_q8: y {} x {} for a {}x{} {:?} matrix",
            y.len(),
            x.len(),
            w.rows,
            w.cols,
            w.ty
        );
    }
    let mut ys = ys;
    match simd::isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `matvec_row_q8`; shapes checked above.
        Isa::Avx512 if simd::has_avx512_vnni() => unsafe {
            x86_q8::vnni::matvec(w.ty, w.data, w.cols, &xs, &mut ys)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `matvec_row_q8`.
        Isa::Avx512 | Isa::Avx2 => unsafe {
            x86_q8::avx2::matvec(w.ty, w.data, w.cols, &xs, &mut ys)
        },
        _ => {
            for (y, x) in ys.into_iter().zip(xs) {
                q8::matvec(w.ty, w.data, w.cols, x, y);
            }
        }
    }
}

fn check(y: &[f32], w: &QMatrix, x: &[f32]) {
    assert!(
        y.len() == w.rows && x.len() == w.cols,
        "matvec: y {} x {} for a {}x{} matrix",
        y.len(),
        x.len(),
        w.rows,
        w.cols
    );
}

/// [`matvec`] on the calling thread.
pub fn matvec_rows(y: &mut [f32], w: QMatrix, x: &[f32]) {
    check(y, &w, x);
    match simd::isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa` reports AVX-512 only when the CPU has it; shapes checked above.
        Isa::Avx512 => unsafe { avx512::matvec(w.ty, w.data, w.cols, x, y) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, for AVX2/FMA/F16C.
        Isa::Avx2 => unsafe { avx2::matvec(w.ty, w.data, w.cols, x, y) },
        _ => scalar::matvec(w.ty, w.data, w.cols, x, y),
    }
}

/// Dequantises every row of `w` into `out` (`rows x cols`, f32), on the calling thread; the
/// values equal [`dequantize`]'s.
pub fn dequantize_rows(out: &mut [f32], w: QMatrix) {
    assert_eq!(out.len(), w.rows * w.cols, "dequantize_rows: out length");
    match simd::isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa` reports AVX-512 only when the CPU has it; length checked above.
        Isa::Avx512 => unsafe { avx512::dequantize(w.ty, w.data, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, for AVX2/FMA/F16C.
        Isa::Avx2 => unsafe { avx2::dequantize(w.ty, w.data, out) },
        _ => dequantize(w.ty, w.data, out),
    }
}
