//! The grids weights are rounded to: a generic affine grid (the study's, f32 scales) and the
//! GGUF block formats, whose grids are fixed by how the file stores them.
//!
//! Every grid is `value = (q − zero)·d + m` in f32 for a code `q` in `0..=qmax` (or, for the
//! non-linear `IQ4_NL` and `IQ4_XS`, `value = d·k[q]` with 16 fixed levels `k`, [`super::iq4`]),
//! with `d`, `m` per sub-block of `sub` weights, computed exactly as the format's dequantiser computes it
//! (llama.cpp, gguf-py and this crate's `dequantize`), so a weight rounded here is bit for bit
//! the weight the file gives back:
//! - `Q8_0` (32 weights): `d` f16, `q − 127` as i8; `value = (q−127)·d`.
//! - `Q4_0` (32): `d` f16 (`max/−8`, the signed extreme maps to code 0); `value = (q−8)·d`.
//! - `Q4_1` (32): `d`, `m` f16 (range `[min, max]`); `value = q·d + m`.
//! - `Q5_0` (32): `d` f16 (`max/−16`); `value = (q−16)·d`, 5-bit codes.
//! - `Q5_1` (32): `d`, `m` f16 (range `[min, max]`); `value = q·d + m`, 5-bit codes.
//! - `Q4_K`, `Q5_K` (super-block of 256 = 8 sub-blocks of 32): f16 `d`, `dmin`, and per
//!   sub-block a 6-bit scale `sc` and 6-bit min `mn`; `value = (d·sc)·q − dmin·mn`
//!   (`m = −dmin·mn`), codes of 4 or 5 bits.
//! - `Q6_K` (super-block of 256 = 16 sub-blocks of 16): f16 `d` and a signed 8-bit scale `sc`
//!   per sub-block; `value = (q−32)·(d·sc)`, 6-bit codes.
//! - `IQ4_NL` (32): `d` f16; `value = d·k[q]`. `IQ4_XS` (super-block of 256 = 8 sub-blocks of
//!   32): f16 `d` and a 6-bit `ls` per sub-block; `value = (d·(ls−32))·k[q]`.
//!
//! [`Format::params`] sets each grid from the span's range (llama.cpp's reference quantisers
//! without a search); [`super::search`] finds llama.cpp's searched scales and minimums.
//!
//! The span is how many consecutive weights of a row share one decision of the grid: a
//! block (32, or 256 for `Q4_K`), or the generic grid's group (the whole row for group 0).

use half::f16;

use crate::io::gguf::GgmlType;

/// A weight grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `bits`-bit codes, one grid per `group` inputs (0: per output channel); symmetric
    /// (`±amax`, no zero-point) or asymmetric (integer zero-point over `[min, max]`, each
    /// widened to include 0, as GPTQ's quantiser). Scales in f32: a study grid, not a file's.
    Affine {
        /// Bits per weight, 2 to 8.
        bits: u32,
        /// Inputs per grid (0: the whole row).
        group: usize,
        /// No zero-point.
        symmetric: bool,
    },
    /// GGUF `Q8_0`.
    Q8_0,
    /// GGUF `Q4_0`.
    Q4_0,
    /// GGUF `Q4_1`.
    Q4_1,
    /// GGUF `Q5_0`.
    Q5_0,
    /// GGUF `Q5_1`.
    Q5_1,
    /// GGUF `Q4_K`.
    Q4K,
    /// GGUF `Q5_K`.
    Q5K,
    /// GGUF `Q6_K`.
    Q6K,
    /// GGUF `IQ4_NL`.
    Iq4Nl,
    /// GGUF `IQ4_XS`.
    Iq4Xs,
}

/// One span's grid: `value(j, q) = (q − zero)·d[j/sub] + m[j/sub]` and the bytes a block
/// format stores before its codes.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Weights per sub-block.
    pub sub: usize,
    /// Step per sub-block.
    pub d: Vec<f32>,
    /// Offset per sub-block.
    pub m: Vec<f32>,
    /// The code of zero step.
    pub zero: i32,
    /// Largest code.
    pub qmax: i32,
    /// The block's header bytes (scales, mins) for GGUF formats; empty for `Affine`.
    pub head: Vec<u8>,
    /// A non-linear grid's levels (`IQ4_NL`, `IQ4_XS`): `value = d·levels[q]`; `None`: affine.
    pub levels: Option<&'static [i8; 16]>,
}

impl Params {
    /// The grid value of code `q` at position `j` of the span.
    pub fn value(&self, j: usize, q: u8) -> f32 {
        let s = j / self.sub;
        match self.levels {
            Some(k) => self.d[s] * f32::from(k[usize::from(q)]),
            None => (i32::from(q) - self.zero) as f32 * self.d[s] + self.m[s],
        }
    }

    /// The code whose value is nearest (rounding the affine coordinate, or comparing every
    /// level of a non-linear grid) to `x` at `j`.
    pub fn code(&self, j: usize, x: f64) -> u8 {
        if self.levels.is_some() {
            let dist = |q: u8| (x - f64::from(self.value(j, q))).abs();
            return (0..=15u8).fold(0, |b, q| if dist(q) < dist(b) { q } else { b });
        }
        let s = j / self.sub;
        let d = f64::from(self.d[s]);
        if d == 0.0 {
            return self.zero.clamp(0, self.qmax) as u8;
        }
        let q = ((x - f64::from(self.m[s])) / d).round() + f64::from(self.zero);
        q.clamp(0.0, f64::from(self.qmax)) as u8
    }
}

/// `x` rounded to f16, and its bytes.
pub(crate) fn h(x: f32) -> (f32, [u8; 2]) {
    let v = f16::from_f32(x);
    (v.to_f32(), v.to_le_bytes())
}

impl Format {
    /// Weights of a row that share one grid decision, for rows of `cols` inputs.
    pub fn span(self, cols: usize) -> usize {
        match self {
            Format::Affine { group, .. } if group == 0 || group > cols => cols,
            Format::Affine { group, .. } => group,
            f => f.ggml_type().map_or(cols, |t| t.block().0),
        }
    }

    /// Bits per code.
    pub fn bits(self) -> u32 {
        match self {
            Format::Affine { bits, .. } => bits,
            Format::Q8_0 => 8,
            Format::Q6K => 6,
            Format::Q5_0 | Format::Q5_1 | Format::Q5K => 5,
            Format::Q4_0 | Format::Q4_1 | Format::Q4K | Format::Iq4Nl | Format::Iq4Xs => 4,
        }
    }

    /// The GGUF block format a file stores it as (`None` for the study's affine grid): the
    /// one source of its ggml id, block size and bytes.
    pub fn ggml_type(self) -> Option<GgmlType> {
        Some(match self {
            Format::Affine { .. } => return None,
            Format::Q8_0 => GgmlType::Q8_0,
            Format::Q4_0 => GgmlType::Q4_0,
            Format::Q4_1 => GgmlType::Q4_1,
            Format::Q5_0 => GgmlType::Q5_0,
            Format::Q5_1 => GgmlType::Q5_1,
            Format::Q4K => GgmlType::Q4_K,
            Format::Q5K => GgmlType::Q5_K,
            Format::Q6K => GgmlType::Q6_K,
            Format::Iq4Nl => GgmlType::IQ4_NL,
            Format::Iq4Xs => GgmlType::IQ4_XS,
        })
    }

    /// Bytes a block of [`Format::span`] weights takes in a file (`None` for `Affine`).
    pub fn block_bytes(self) -> Option<usize> {
        self.ggml_type().map(|t| t.block().1)
    }

    /// Why rows of `cols` inputs cannot take this grid, if they cannot.
    pub fn check(self, cols: usize) -> Result<(), String> {
        if let Format::Affine { bits, .. } = self
            && !(2..=8).contains(&bits)
        {
            return Err(format!("{bits}-bit weights: use 2 to 8 bits"));
        }
        let span = self.span(cols);
        if !cols.is_multiple_of(span) {
            return Err(format!(
                "rows of {cols} inputs are not a whole number of {span}-weight blocks ({self:?})"
            ));
        }
        Ok(())
    }

    /// The grid of one span `w` (a row's `span` consecutive weights), its range shrunk by
    /// `clip` (1: the full range; the clipping search tries smaller ratios).
    pub fn params(self, w: &[f32], clip: f32) -> Params {
        let amax = w.iter().fold(0.0f32, |a, x| a.max(x.abs())) * clip;
        let lo = w.iter().fold(0.0f32, |a, &x| a.min(x)) * clip;
        let hi = w.iter().fold(0.0f32, |a, &x| a.max(x)) * clip;
        let one = |d: f32, m: f32, zero: i32, qmax: i32, head: Vec<u8>| Params {
            sub: w.len().max(1),
            d: vec![d],
            m: vec![m],
            zero,
            qmax,
            head,
            levels: None,
        };
        match self {
            Format::Affine {
                bits,
                symmetric: true,
                ..
            } => {
                let q = (1i32 << (bits - 1)) - 1;
                one(amax / q as f32, 0.0, q, 2 * q, Vec::new())
            }
            Format::Affine { bits, .. } => {
                let q = (1i32 << bits) - 1;
                let d = (hi - lo) / q as f32;
                let zero = if d > 0.0 { (-lo / d).round() as i32 } else { 0 };
                one(d, 0.0, zero, q, Vec::new())
            }
            Format::Q8_0 => {
                let (d, b) = h(amax / 127.0);
                one(d, 0.0, 127, 254, b.to_vec())
            }
            Format::Q4_0 | Format::Q5_0 => {
                // The signed extreme, so that code 0 (−8 or −16 steps) reaches it exactly.
                let half = if self == Format::Q4_0 { 8 } else { 16 };
                let max = w
                    .iter()
                    .fold(0.0f32, |a, &x| if x.abs() > a.abs() { x } else { a });
                let (d, b) = h(max * clip / -(half as f32));
                one(d, 0.0, half, 2 * half - 1, b.to_vec())
            }
            Format::Q4_1 | Format::Q5_1 => {
                let qmax = if self == Format::Q4_1 { 15 } else { 31 };
                let lo = w.iter().copied().fold(f32::INFINITY, f32::min) * clip;
                let hi = w.iter().copied().fold(f32::NEG_INFINITY, f32::max) * clip;
                let (d, bd) = h((hi - lo) / qmax as f32);
                let (m, bm) = h(lo);
                one(d, m, 0, qmax, [bd, bm].concat())
            }
            Format::Q4K | Format::Q5K => kquant_params(w, clip, self.qmax()),
            Format::Q6K => q6k_params(w, clip),
            Format::Iq4Nl | Format::Iq4Xs => super::iq4::plain(self, w, clip),
        }
    }

    /// The largest code.
    pub fn qmax(self) -> i32 {
        (1i32 << self.bits()) - 1
    }
}

impl Format {
    /// The block formats a quantised GGUF file is written in, by the names
    /// [`str::parse`] takes.
    pub const FILE_NAMES: [&'static str; 10] = [
        "q8_0", "q6_k", "q5_k", "q5_1", "q5_0", "q4_k", "q4_1", "q4_0", "iq4_nl", "iq4_xs",
    ];

    /// The name of a block format (`q4_k`); `None` for the study's affine grid.
    pub fn file_name(self) -> Option<&'static str> {
        match self {
            Format::Affine { .. } => None,
            Format::Q8_0 => Some("q8_0"),
            Format::Q4_0 => Some("q4_0"),
            Format::Q4_1 => Some("q4_1"),
            Format::Q5_0 => Some("q5_0"),
            Format::Q5_1 => Some("q5_1"),
            Format::Q4K => Some("q4_k"),
            Format::Q5K => Some("q5_k"),
            Format::Q6K => Some("q6_k"),
            Format::Iq4Nl => Some("iq4_nl"),
            Format::Iq4Xs => Some("iq4_xs"),
        }
    }
}

impl Format {
    /// The block formats, in [`Format::FILE_NAMES`]' order.
    pub const BLOCK_FORMATS: [Format; 10] = [
        Format::Q8_0,
        Format::Q6K,
        Format::Q5K,
        Format::Q5_1,
        Format::Q5_0,
        Format::Q4K,
        Format::Q4_1,
        Format::Q4_0,
        Format::Iq4Nl,
        Format::Iq4Xs,
    ];
}

impl std::str::FromStr for Format {
    type Err = crate::Error;

    /// A block format of a quantised file ([`Format::FILE_NAMES`]); anything else names the
    /// `gguf_type` field.
    fn from_str(s: &str) -> crate::Result<Self> {
        Format::FILE_NAMES
            .iter()
            .position(|&n| n == s)
            .map(|i| Self::BLOCK_FORMATS[i])
            .ok_or_else(|| {
                super::QuantError::Invalid(format!(
                    "`gguf_type` {s:?}: use one of {}",
                    Format::FILE_NAMES.join(", ")
                ))
                .into()
            })
    }
}

/// `Q4_K`'s and `Q5_K`'s two-level grid (codes `0..=qmax`): each sub-block of 32 gets the
/// affine range `[min(x,0), max(x)]` (its min is stored as a non-negative offset), and the 8
/// scales and mins are rounded to 6 bits against the super-block's f16 `d` and `dmin`.
fn kquant_params(w: &[f32], clip: f32, qmax: i32) -> Params {
    let subs: Vec<(f32, f32)> = w
        .chunks(32)
        .map(|s| {
            let lo = s.iter().fold(0.0f32, |a, &x| a.min(x)) * clip;
            let hi = s.iter().fold(lo, |a, &x| a.max(x * clip));
            ((hi - lo) / qmax as f32, -lo)
        })
        .collect();
    let scales: Vec<f32> = subs.iter().map(|s| s.0).collect();
    let mins: Vec<f32> = subs.iter().map(|s| s.1).collect();
    let (ls, d) = six_bits(&scales);
    let (lm, dmin) = six_bits(&mins);
    kquant_grid(&ls, &lm, d, dmin, qmax)
}

/// Values rounded to 6 bits against `max/63`, and that unit (llama.cpp's reference).
pub(crate) fn six_bits(x: &[f32]) -> (Vec<u8>, f32) {
    let max = x.iter().fold(0.0f32, |a, &v| a.max(v));
    let inv = if max > 0.0 { 63.0 / max } else { 0.0 };
    let l = x
        .iter()
        .map(|&v| (inv * v).round_ties_even().clamp(0.0, 63.0) as u8)
        .collect();
    (l, max / 63.0)
}

/// The `Q4_K`/`Q5_K` grid of 6-bit scales `ls` and mins `lm` against super-block units `d`
/// and `dmin` (rounded to f16 here), with the 12 packed bytes as ggml stores them.
pub(crate) fn kquant_grid(ls: &[u8], lm: &[u8], d: f32, dmin: f32, qmax: i32) -> Params {
    let (d, bd) = h(d);
    let (dmin, bm) = h(dmin);
    let mut scales = [0u8; 12];
    for j in 0..8 {
        if j < 4 {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (ls[j] & 0xF) | ((lm[j] & 0xF) << 4);
            scales[j - 4] |= (ls[j] >> 4) << 6;
            scales[j] |= (lm[j] >> 4) << 6;
        }
    }
    Params {
        sub: 32,
        d: ls.iter().map(|&s| d * f32::from(s)).collect(),
        m: lm.iter().map(|&s| -(dmin * f32::from(s))).collect(),
        zero: 0,
        qmax,
        head: [&bd[..], &bm[..], &scales[..]].concat(),
        levels: None,
    }
}

/// `Q6_K`'s grid: each sub-block of 16 gets the signed scale `max/−32` (its signed extreme at
/// code 0), and the 16 scales are rounded to signed 8 bits against the super-block's f16
/// `d = max_scale/−128` (llama.cpp's reference without its search).
fn q6k_params(w: &[f32], clip: f32) -> Params {
    let scales: Vec<f32> = w
        .chunks(16)
        .map(|s| {
            let max = s
                .iter()
                .fold(0.0f32, |a, &x| if x.abs() > a.abs() { x } else { a });
            max * clip / -32.0
        })
        .collect();
    q6k_grid(&scales)
}

/// The `Q6_K` grid of sub-block scales `scales` (16): llama.cpp's rounding of them to
/// signed 8 bits against `d = max/−128` of the largest in magnitude.
pub(crate) fn q6k_grid(scales: &[f32]) -> Params {
    let max = scales
        .iter()
        .fold(0.0f32, |a, &x| if x.abs() > a.abs() { x } else { a });
    let (sc, d): (Vec<i8>, f32) = if max.abs() < 1e-15 {
        (vec![0; 16], 0.0)
    } else {
        let iscale = -128.0 / max;
        (
            scales
                .iter()
                .map(|&s| (iscale * s).round_ties_even().clamp(-128.0, 127.0) as i8)
                .collect(),
            1.0 / iscale,
        )
    };
    let (d, bd) = h(d);
    let mut head: Vec<u8> = sc.iter().map(|&s| s as u8).collect();
    head.extend_from_slice(&bd);
    Params {
        sub: 16,
        d: sc.iter().map(|&s| d * f32::from(s)).collect(),
        m: vec![0.0; 16],
        zero: 32,
        qmax: 63,
        head,
        levels: None,
    }
}

/// Rounds every weight of `w` (one span) to its nearest code on `p`, returning the codes.
pub fn round_span(p: &Params, w: &[f32]) -> Vec<u8> {
    w.iter()
        .enumerate()
        .map(|(j, &x)| p.code(j, f64::from(x)))
        .collect()
}
