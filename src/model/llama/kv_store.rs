//! Where a KV cache's keys and values live, in f32, f16 or group-quantised codes
//! ([`super::kv_quant`]), and the attention over them.
//!
//! With f16 storage (llama.cpp's default cache type) the linear layers still write each new
//! key and value row in f32, into a staging buffer; `KvStore::commit` rounds the rows to f16
//! (round to nearest even) into the cache and writes the rounded values back to the staging
//! rows, so every attention reads the same rounded keys and values: a decode step reads the
//! f16 rows directly ([`attention_decode_f16`]), a prefill chunk widens the cached rows before
//! it into the staging buffer and runs the f32 block kernel over it. Queries, scores, softmax
//! and outputs stay f32. The f16 cache keeps each head's positions contiguous (`H_kv x cap x
//! D`, where staging is `cap x H_kv·D`): a decode step reads every head as one stream, not as
//! rows strided by the other heads (its cold read of the cache was half of its attention time).

use std::ops::Range;

use half::f16;
use half::slice::HalfFloatSliceExt;
use serde::Serialize;

use crate::nn::attention::{HeadLayout, Heads, HeadsMut};
use crate::nn::attention_cached::{self, CachedDims};
use crate::nn::attention_decode_f16;

use super::kv_quant::QuantStore;

/// The element type of cached keys and values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvDtype {
    /// 32-bit floats: the keys and values exactly as computed.
    #[default]
    F32,
    /// IEEE half precision, as llama.cpp caches by default: half the bytes per position.
    F16,
    /// `bits`-bit codes (8 or 4) per token, in groups of `group` values inside each head
    /// (0: one group per head), each with an f32 scale and zero point (asymmetric min/max
    /// round to nearest, as QuaRot quantises its KV cache; [`super::kv_quant`]).
    Quant {
        /// Bits per code: 8 or 4.
        bits: u32,
        /// Values per group (0: the head width).
        group: usize,
    },
}

impl KvDtype {
    /// Every choice, as the command line names them.
    pub const NAMES: &'static str = "f32, f16, q8, q4 (q8-gN, q4-gN: groups of N values in a head)";

    /// Bytes of one position's keys (or values) in one layer: `width` values in heads of
    /// `head_dim`, with the scales and zero points of a quantised cache.
    pub fn row_bytes(self, width: usize, head_dim: usize) -> usize {
        match self {
            KvDtype::F32 => 4 * width,
            KvDtype::F16 => 2 * width,
            KvDtype::Quant { bits, group } => {
                let g = if group == 0 { head_dim } else { group }.max(1);
                (width * bits as usize).div_ceil(8) + 8 * width.div_ceil(g)
            }
        }
    }

    /// The name the command line and reports use (`f32`, `f16`, `q4`, `q4-g32`).
    pub fn name(self) -> String {
        match self {
            KvDtype::F32 => "f32".into(),
            KvDtype::F16 => "f16".into(),
            KvDtype::Quant { bits, group: 0 } => format!("q{bits}"),
            KvDtype::Quant { bits, group } => format!("q{bits}-g{group}"),
        }
    }

    /// Parses a name (`f32`, `f16`, `q8`, `q4`, `q8-g32`, ...), or says what is allowed, naming
    /// the `kv_cache` field.
    pub fn parse(s: &str) -> Result<Self, String> {
        let name = s.trim().to_ascii_lowercase();
        let bad = || {
            format!(
                "`kv_cache` {s:?} is not a KV cache type: use one of {}",
                Self::NAMES
            )
        };
        match name.as_str() {
            "f32" => return Ok(KvDtype::F32),
            "f16" => return Ok(KvDtype::F16),
            _ => {}
        }
        let (bits, group) = match name.split_once("-g") {
            Some((b, g)) => (b, g.parse::<usize>().map_err(|_| bad())?),
            None => (name.as_str(), 0),
        };
        let bits = match bits {
            "q8" => 8,
            "q4" => 4,
            _ => return Err(bad()),
        };
        if name.contains("-g") && group == 0 {
            return Err(format!("`kv_cache` {s:?}: a group holds at least 1 value"));
        }
        Ok(KvDtype::Quant { bits, group })
    }
}

impl std::fmt::Display for KvDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for KvDtype {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// Keys and values of every layer (`cap x K·D` each), in their stored type.
#[derive(Debug, Clone)]
pub(crate) enum KvStore {
    /// Group-quantised codes, with staging rows.
    Quant(Box<QuantStore>),
    /// f32 rows; the linear layers write straight into them.
    F32 { k: Vec<Vec<f32>>, v: Vec<Vec<f32>> },
    /// f16 heads (`H_kv x cap x D` per layer), and one layer's f32 staging rows
    /// (`cap x H_kv·D`) for keys (`sk`) and values (`sv`).
    F16 {
        k: Vec<Vec<f16>>,
        v: Vec<Vec<f16>>,
        sk: Vec<f32>,
        sv: Vec<f32>,
        /// Values per position (`H_kv·D`).
        width: usize,
        /// Values per head (`D`).
        head_dim: usize,
    },
}

impl KvStore {
    /// Zeroed storage for `layers` layers of `per_layer` elements each, rows of `width`
    /// values in heads of `head_dim` (a quantised cache's group must divide `head_dim`,
    /// checked by the cache).
    pub(super) fn new(
        dtype: KvDtype,
        layers: usize,
        per_layer: usize,
        width: usize,
        head_dim: usize,
    ) -> Self {
        match dtype {
            KvDtype::Quant { bits, group } => {
                let g = if group == 0 { head_dim } else { group };
                KvStore::Quant(Box::new(QuantStore::new(
                    bits,
                    g,
                    layers,
                    per_layer / width.max(1),
                    width,
                )))
            }
            KvDtype::F32 => KvStore::F32 {
                k: vec![vec![0.0; per_layer]; layers],
                v: vec![vec![0.0; per_layer]; layers],
            },
            KvDtype::F16 => KvStore::F16 {
                k: vec![vec![f16::ZERO; per_layer]; layers],
                v: vec![vec![f16::ZERO; per_layer]; layers],
                sk: vec![0.0; per_layer],
                sv: vec![0.0; per_layer],
                width,
                head_dim,
            },
        }
    }

    /// The stored type.
    pub(super) fn dtype(&self) -> KvDtype {
        match self {
            KvStore::F32 { .. } => KvDtype::F32,
            KvStore::F16 { .. } => KvDtype::F16,
            KvStore::Quant(q) => KvDtype::Quant {
                bits: q.bits(),
                group: q.group(),
            },
        }
    }

    /// Bytes held (staging included).
    pub(super) fn bytes(&self) -> usize {
        match self {
            KvStore::F32 { k, v } => 4 * k.iter().chain(v).map(Vec::len).sum::<usize>(),
            KvStore::F16 { k, v, sk, sv, .. } => {
                2 * k.iter().chain(v).map(Vec::len).sum::<usize>() + 4 * (sk.len() + sv.len())
            }
            KvStore::Quant(q) => q.bytes(),
        }
    }

    /// Elements `at` of layer `l`'s keys and values as f32 rows for the linear layers to write
    /// new positions into (the cache itself, or the staging rows until [`commit`](Self::commit)).
    pub(super) fn new_rows(&mut self, l: usize, at: Range<usize>) -> (&mut [f32], &mut [f32]) {
        match self {
            KvStore::F32 { k, v } => (&mut k[l][at.clone()], &mut v[l][at]),
            KvStore::F16 { sk, sv, .. } => (&mut sk[at.clone()], &mut sv[at]),
            KvStore::Quant(q) => q.new_rows(at),
        }
    }

    /// Stores the rows written through [`new_rows`](Self::new_rows) (keys with RoPE applied;
    /// `at` covers whole positions): f16 storage rounds them into the cache and writes the
    /// rounded values back to staging.
    pub(super) fn commit(&mut self, l: usize, at: Range<usize>) {
        if let KvStore::Quant(q) = self {
            q.commit(l, at);
        } else if let KvStore::F16 {
            k,
            v,
            sk,
            sv,
            width,
            head_dim,
        } = self
        {
            let (w, d) = (*width, *head_dim);
            for (dst, src) in [(&mut k[l], sk), (&mut v[l], sv)] {
                for (c, s) in head_pieces(w, d, dst.len() / w, at.start / w..at.end / w) {
                    dst[c..c + d].convert_from_f32_slice(&src[s..s + d]);
                    dst[c..c + d].convert_to_f32_slice(&mut src[s..s + d]);
                }
            }
        }
    }

    /// Causal attention of `dims.t` queries (at positions `dims.past..`) over layer `l`'s
    /// cached rows `0..dims.past + dims.t`, laid out by `kv`; `p0` is the number of positions
    /// cached before this pass (rows from `p0` on were just committed).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend(
        &mut self,
        l: usize,
        p0: usize,
        o: HeadsMut,
        scores: &mut [f32],
        q: Heads,
        kv: HeadLayout,
        dims: CachedDims,
        scale: f32,
    ) {
        match self {
            KvStore::Quant(qs) => qs.attend(l, p0, o, scores, q, kv, dims, scale),
            KvStore::F32 { k, v } => {
                let (k, v) = (&k[l], &v[l]);
                let (k, v) = (Heads { x: k, layout: kv }, Heads { x: v, layout: kv });
                attention_cached::forward(o, scores, q, k, v, dims, scale);
            }
            KvStore::F16 {
                k,
                v,
                width,
                head_dim,
                ..
            } if dims.t == 1 => {
                let (w, d) = (*width, *head_dim);
                let heads = HeadLayout::split(k[l].len() / w, w / d, d);
                attention_decode_f16::decode(o, scores, q, (&k[l], &v[l], heads), dims, scale);
            }
            KvStore::F16 {
                k,
                v,
                sk,
                sv,
                width,
                head_dim,
            } => {
                // Rows before p0 come from the f16 cache; rows p0.. are already in staging.
                let (w, d) = (*width, *head_dim);
                for (src, dst) in [(&k[l], &mut *sk), (&v[l], &mut *sv)] {
                    for (c, s) in head_pieces(w, d, src.len() / w, 0..p0) {
                        src[c..c + d].convert_to_f32_slice(&mut dst[s..s + d]);
                    }
                }
                let (k, v) = (Heads { x: sk, layout: kv }, Heads { x: sv, layout: kv });
                attention_cached::forward(o, scores, q, k, v, dims, scale);
            }
        }
    }
}

/// Where the f16 cache (`H_kv x cap x D`) and the staging rows (`cap x H_kv·D`) hold the `D`
/// values of each head at each of `positions`: `(cache offset, staging offset)` pairs.
fn head_pieces(
    width: usize,
    head_dim: usize,
    cap: usize,
    positions: Range<usize>,
) -> impl Iterator<Item = (usize, usize)> {
    positions.flat_map(move |p| {
        (0..width / head_dim)
            .map(move |h| (h * cap * head_dim + p * head_dim, p * width + h * head_dim))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_bytes() {
        assert_eq!(KvDtype::parse("f16"), Ok(KvDtype::F16));
        assert_eq!(KvDtype::parse(" F32 "), Ok(KvDtype::F32));
        let q4 = KvDtype::Quant { bits: 4, group: 0 };
        assert_eq!(KvDtype::parse("q4"), Ok(q4));
        let q8g = KvDtype::Quant { bits: 8, group: 32 };
        assert_eq!(KvDtype::parse("Q8-g32"), Ok(q8g));
        for bad in ["q3", "q4-g", "q4-g0", "q4-gx", "f8"] {
            let e = KvDtype::parse(bad).unwrap_err();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains("`kv_cache`"),
                "{e}"
            );
        }
        assert!(
            KvDtype::parse("i8")
                .unwrap_err()
                .contains("f32, f16, q8, q4")
        );
        assert_eq!(
            (
                KvDtype::F32.row_bytes(128, 64),
                KvDtype::F16.row_bytes(128, 64)
            ),
            (512, 256)
        );
        // 4-bit codes, one scale and zero (8 bytes) per head of 64 or per 32 values.
        assert_eq!(q4.row_bytes(128, 64), 64 + 16);
        assert_eq!(q8g.row_bytes(128, 64), 128 + 32);
        assert_eq!(KvDtype::default().to_string(), "f32");
        assert_eq!(
            (q4.to_string(), q8g.to_string()),
            ("q4".into(), "q8-g32".into())
        );
        assert_eq!(serde_json::to_string(&q8g).unwrap(), "\"q8-g32\"");
    }

    #[test]
    fn f16_commit_rounds_storage_and_staging_alike() {
        // 2 layers, 2 positions of 2 heads of 2 values; position 1 of layer 1 is written.
        let mut s = KvStore::new(KvDtype::F16, 2, 8, 4, 2);
        let (k, v) = s.new_rows(1, 4..8);
        k.copy_from_slice(&[1.0, 0.1, -3.3, 1e-3]);
        v.copy_from_slice(&[2.0, 0.2, 65504.0, 7.0]);
        s.commit(1, 4..8);
        let KvStore::F16 { k, sk, .. } = &s else {
            panic!("f16 store")
        };
        let want: Vec<f32> = [1.0f32, 0.1, -3.3, 1e-3]
            .iter()
            .map(|&x| f16::from_f32(x).to_f32())
            .collect();
        assert_eq!(&sk[4..8], &want[..]);
        // Head-major storage: head 0's positions 0, 1, then head 1's.
        let stored: Vec<f32> = k[1].iter().map(|x| x.to_f32()).collect();
        assert_eq!(
            stored,
            [0.0, 0.0, want[0], want[1], 0.0, 0.0, want[2], want[3]]
        );
        assert_ne!(
            sk[5], 0.1,
            "0.1 is not an f16 value: it must have been rounded"
        );
        assert_eq!(s.bytes(), 2 * 2 * 2 * 8 + 4 * 2 * 8);
    }

    /// The f16 store keeps heads contiguous, the f32 store rows: on f16-representable keys
    /// and values both attend alike, for a decode step (the f16 kernels) and for a chunk after
    /// cached positions (rows widened back from the heads), with 2 query heads per key head.
    #[test]
    fn f16_heads_attend_as_the_f32_rows_of_the_same_values() {
        use rand::Rng;
        let (kv_heads, d, cap) = (2, 16, 6);
        let (w, qh) = (kv_heads * d, 2 * kv_heads);
        let mut r = crate::init::rng::seeded(3);
        let mut draw = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| f16::from_f32(r.random_range(-1.0f32..1.0)).to_f32())
                .collect()
        };
        let (keys, values, q) = (draw(cap * w), draw(cap * w), draw(2 * qh * d));
        for (t, p0) in [(1, 5), (2, 3)] {
            let mut outs = Vec::new();
            for dtype in [KvDtype::F16, KvDtype::F32] {
                let mut s = KvStore::new(dtype, 1, cap * w, w, d);
                for at in [0..p0 * w, p0 * w..(p0 + t) * w] {
                    let (k, v) = s.new_rows(0, at.clone());
                    k.copy_from_slice(&keys[at.clone()]);
                    v.copy_from_slice(&values[at.clone()]);
                    s.commit(0, at);
                }
                let mut o = vec![0.0; t * qh * d];
                let mut scores = vec![0.0; qh * cap * cap];
                let ql = HeadLayout::rows(t, qh * d, d);
                let dims = CachedDims {
                    b: 1,
                    h: qh,
                    kv_h: kv_heads,
                    t,
                    past: p0,
                    d,
                };
                let (x, layout) = (&q[..t * qh * d], ql);
                let o_heads = HeadsMut {
                    x: &mut o,
                    layout: ql,
                };
                let kv = HeadLayout::rows(cap, w, d);
                s.attend(
                    0,
                    p0,
                    o_heads,
                    &mut scores,
                    Heads { x, layout },
                    kv,
                    dims,
                    0.25,
                );
                outs.push(o);
            }
            for (a, b) in outs[0].iter().zip(&outs[1]) {
                assert!((a - b).abs() <= 1e-6, "t {t}: f16 {a} vs f32 {b}");
            }
            if t > 1 {
                assert_eq!(outs[0], outs[1], "a chunk reads the same widened rows");
            }
        }
    }
}
