//! Which block format each tensor of a quantised file gets: one format for every matrix, or
//! one of llama-quantize's mixes (`Q4_K_M`, `Q4_K_S`, `Q5_K_M`, `Q5_K_S`), with the same
//! per-tensor choices as `llama_tensor_get_type` in `llama-quant.cpp` (llama.cpp as vendored
//! by llama-cpp-python 0.3.36), and the user's overrides on top.
//!
//! The rules, for a model of `L` layers (`more(i)`: `i < L/8 || i ≥ 7L/8 || (i − L/8) % 3 == 2`):
//! - every matrix starts at the file's type (the mix's base: `Q4_K` or `Q5_K`);
//! - `output.weight` (or a tied `token_embd.weight`): `Q8_0` when its rows do not divide the
//!   base type's block, else `Q6_K` (unless the base is `Q8_0`);
//! - `attn_v`: `Q6_K` where `more(i)` (`_M` mixes); `Q5_K` in the first 4 layers (`Q4_K_S`);
//! - `ffn_down`: `Q6_K` where `more(i)` (`_M` mixes); `Q5_K` in the first `L/8` (`Q4_K_S`);
//!   with calibration data, `Q4_0`/`Q5_0` files keep the first `L/8` as `Q4_1`/`Q5_1`;
//! - `IQ4_NL`/`IQ4_XS` files: `attn_v` `Q5_K` when 4 or more query heads share a KV head,
//!   and, without calibration data, `ffn_down` `Q5_K` in the first `L/8`;
//! - an override (`PATTERN=TYPE`, the first whose pattern is part of the tensor's GGUF name)
//!   replaces these rules for that tensor, as llama-quantize's `--tensor-type` does (which
//!   takes a regular expression; here a plain substring);
//! - last, a 256-weight type whose rows are not whole super-blocks falls back as llama.cpp's
//!   does: `Q4_K` → `Q5_0`, `Q5_K` → `Q5_1`, `Q6_K` → `Q8_0`, `IQ4_XS` → `IQ4_NL`; a row that is not whole 32-weight
//!   blocks is refused (llama.cpp would store it F16, which this writer does not).

use serde::Serialize;

use super::QuantError;
use super::grid::Format;
use crate::io::gguf::keys;
use crate::model::llama::{LayerTensor, LlamaConfig};

/// A file's quantisation: one block format, or a mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    /// Every matrix in this format (the output rule and fallbacks still apply).
    Single(Format),
    /// llama-quantize's `Q4_K_M`.
    Q4KM,
    /// llama-quantize's `Q4_K_S`.
    Q4KS,
    /// llama-quantize's `Q5_K_M`.
    Q5KM,
    /// llama-quantize's `Q5_K_S`.
    Q5KS,
}

impl FileType {
    /// The mixes' names.
    pub const MIX_NAMES: [&'static str; 4] = ["q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s"];

    /// Every name [`str::parse`] takes: the block formats, then the mixes.
    pub fn names() -> Vec<&'static str> {
        Format::FILE_NAMES
            .iter()
            .chain(&Self::MIX_NAMES)
            .copied()
            .collect()
    }

    /// The name (`q4_k_m`, `q4_0`).
    pub fn name(self) -> &'static str {
        match self {
            FileType::Single(f) => f.file_name().unwrap_or("affine"),
            FileType::Q4KM => "q4_k_m",
            FileType::Q4KS => "q4_k_s",
            FileType::Q5KM => "q5_k_m",
            FileType::Q5KS => "q5_k_s",
        }
    }

    /// The format every matrix starts from.
    pub fn base(self) -> Format {
        match self {
            FileType::Single(f) => f,
            FileType::Q4KM | FileType::Q4KS => Format::Q4K,
            FileType::Q5KM | FileType::Q5KS => Format::Q5K,
        }
    }
}

impl std::str::FromStr for FileType {
    type Err = crate::Error;

    /// A block format (`q4_0`) or a mix (`q4_k_m`); anything else names `gguf_type`.
    fn from_str(s: &str) -> crate::Result<Self> {
        Ok(match s {
            "q4_k_m" => FileType::Q4KM,
            "q4_k_s" => FileType::Q4KS,
            "q5_k_m" => FileType::Q5KM,
            "q5_k_s" => FileType::Q5KS,
            _ => FileType::Single(s.parse::<Format>().map_err(|_| {
                QuantError::Invalid(format!(
                    "`gguf_type` {s:?}: use one of {}",
                    FileType::names().join(", ")
                ))
            })?),
        })
    }
}

/// One `PATTERN=TYPE` override: tensors whose GGUF name contains `pattern` get `format`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorOverride {
    /// A part of a GGUF tensor name (`attn_v`, `blk.0.ffn_down`, `token_embd`).
    pub pattern: String,
    /// Its block format.
    pub format: Format,
}

impl std::str::FromStr for TensorOverride {
    type Err = crate::Error;

    /// `PATTERN=TYPE`; anything else names `tensor_type`.
    fn from_str(s: &str) -> crate::Result<Self> {
        let bad = |why: String| QuantError::Invalid(format!("`tensor_type` {s:?}: {why}"));
        let (pattern, ty) = s
            .split_once('=')
            .ok_or_else(|| bad("write PATTERN=TYPE, e.g. attn_v=q8_0".into()))?;
        if pattern.is_empty() {
            return Err(bad("the pattern before `=` is empty".into()).into());
        }
        let format = ty.parse::<Format>().map_err(|_| {
            bad(format!(
                "{ty:?} is not a block format: use one of {}",
                Format::FILE_NAMES.join(", ")
            ))
        })?;
        Ok(TensorOverride {
            pattern: pattern.to_string(),
            format,
        })
    }
}

/// The format of every tensor of a file, and how each was reached.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorTypes {
    /// Per layer, q, k, v, o, gate, up, down.
    pub layers: Vec<[Format; 7]>,
    /// `token_embd.weight`.
    pub embed: Format,
    /// `output.weight` (`None` when tied to the embedding).
    pub head: Option<Format>,
    /// Tensors whose type fell back, as `name: from -> to`.
    pub fallbacks: Vec<String>,
    /// Tensors an override chose, as `name: type`.
    pub overridden: Vec<String>,
}

/// Which tensor a rule looks at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Output,
    Embed,
    Layer(usize, usize),
}

/// The format of every tensor of a model of `cfg` (`tied`: no `output.weight`) in a file of
/// type `ft`; `calibrated` says whether the rounding has calibration data (llama.cpp's
/// `has_imatrix`). Refuses a tensor whose rows no fallback can take, naming it.
pub fn choose(
    ft: FileType,
    cfg: &LlamaConfig,
    tied: bool,
    calibrated: bool,
    overrides: &[TensorOverride],
) -> Result<TensorTypes, QuantError> {
    let (c, f) = (cfg.d_model, cfg.d_ff);
    let qd = cfg.n_head * cfg.head_dim();
    let n = cfg.n_layer;
    let gqa = cfg.n_head / cfg.n_kv_head.max(1);
    let cols = [c, c, c, qd, c, c, f];
    let mut out = TensorTypes {
        layers: Vec::with_capacity(n),
        embed: Format::Q8_0,
        head: None,
        fallbacks: Vec::new(),
        overridden: Vec::new(),
    };
    let mut used = vec![false; overrides.len()];
    let mut pick = |name: &str, role: Role, width: usize| -> Result<Format, QuantError> {
        let chosen = match overrides.iter().position(|o| name.contains(&o.pattern)) {
            Some(i) => {
                let o = &overrides[i];
                used[i] = true;
                out.overridden
                    .push(format!("{name}: {}", o.format.file_name().unwrap_or("")));
                o.format
            }
            None => rule(ft, role, width, (n, gqa), calibrated),
        };
        let got = fallback(chosen, width).ok_or_else(|| {
            QuantError::Invalid(format!(
                "tensor {name}: rows of {width} inputs are not a whole number of 32-weight \
                 blocks, which every GGUF block format needs; keep this model in f32/f16"
            ))
        })?;
        if got != chosen {
            out.fallbacks.push(format!(
                "{name}: {} -> {} (rows of {width} are not whole {}-weight blocks)",
                chosen.file_name().unwrap_or(""),
                got.file_name().unwrap_or(""),
                chosen.span(usize::MAX)
            ));
        }
        Ok(got)
    };
    let embed_role = if tied { Role::Output } else { Role::Embed };
    let embed = pick(keys::TOKEN_EMBD, embed_role, c)?;
    let mut layers = Vec::with_capacity(n);
    for l in 0..n {
        let mut row = [Format::Q8_0; 7];
        for (k, slot) in row.iter_mut().enumerate() {
            *slot = pick(
                &LayerTensor::MATRICES[k].gguf_weight(l),
                Role::Layer(l, k),
                cols[k],
            )?;
        }
        layers.push(row);
    }
    let head = if tied {
        None
    } else {
        Some(pick(keys::OUTPUT, Role::Output, c)?)
    };
    // A pattern that chose nothing is a typo or a shadowed rule: never silently ignored.
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(QuantError::Invalid(format!(
            "`tensor_type` {}={}: the pattern matches no tensor of this model that an earlier              pattern does not already take (names are like blk.0.attn_v.weight,              token_embd.weight, output.weight): fix it or drop it",
            overrides[i].pattern,
            overrides[i].format.file_name().unwrap_or("")
        )));
    }
    out.embed = embed;
    out.layers = layers;
    out.head = head;
    Ok(out)
}

/// llama.cpp's `use_more_bits`.
fn more(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64).rem_euclid(3) == 2
}

/// The mix's choice for one tensor (before fallbacks) in a model of `n` layers whose KV heads
/// each serve `gqa` query heads.
fn rule(
    ft: FileType,
    role: Role,
    width: usize,
    (n, gqa): (usize, usize),
    calibrated: bool,
) -> Format {
    let base = ft.base();
    let m = matches!(ft, FileType::Q4KM | FileType::Q5KM);
    let iq4 = matches!(base, Format::Iq4Nl | Format::Iq4Xs);
    match role {
        Role::Output if !width.is_multiple_of(base.span(usize::MAX)) => Format::Q8_0,
        Role::Output if base == Format::Q8_0 => Format::Q8_0,
        Role::Output => Format::Q6K,
        Role::Embed => base,
        // attn_v
        Role::Layer(_, 2) if iq4 && gqa >= 4 => Format::Q5K,
        Role::Layer(i, 2) if m && more(i, n) => Format::Q6K,
        Role::Layer(i, 2) if ft == FileType::Q4KS && i < 4 => Format::Q5K,
        // ffn_down
        Role::Layer(i, 6) if m && more(i, n) => Format::Q6K,
        Role::Layer(i, 6) if ft == FileType::Q4KS && i < n / 8 => Format::Q5K,
        Role::Layer(i, 6) if iq4 && !calibrated && i < n / 8 => Format::Q5K,
        Role::Layer(i, 6) if calibrated && i < n / 8 && base == Format::Q4_0 => Format::Q4_1,
        Role::Layer(i, 6) if calibrated && i < n / 8 && base == Format::Q5_0 => Format::Q5_1,
        Role::Layer(..) => base,
    }
}

/// llama.cpp's fallback of `f` for rows of `width` inputs (`None`: nothing fits).
fn fallback(f: Format, width: usize) -> Option<Format> {
    if width.is_multiple_of(f.span(usize::MAX)) {
        return Some(f);
    }
    let g = match f {
        Format::Q4K => Format::Q5_0,
        Format::Q5K => Format::Q5_1,
        Format::Q6K => Format::Q8_0,
        Format::Iq4Xs => Format::Iq4Nl,
        _ => return None,
    };
    width.is_multiple_of(32).then_some(g)
}

/// Counts of matrices per block format, for reports (`{"q5_0": 180, ...}` in format order).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TypeCounts(pub Vec<(String, usize)>);

impl TensorTypes {
    /// Every tensor's format, embedding and head included.
    pub fn all(&self) -> impl Iterator<Item = Format> + '_ {
        std::iter::once(self.embed)
            .chain(self.layers.iter().flatten().copied())
            .chain(self.head)
    }

    /// How many tensors each format holds.
    pub fn counts(&self) -> TypeCounts {
        TypeCounts(
            Format::BLOCK_FORMATS
                .iter()
                .filter_map(|&f| {
                    let k = self.all().filter(|&g| g == f).count();
                    (k > 0).then(|| (f.file_name().unwrap_or("").to_string(), k))
                })
                .collect(),
        )
    }

    /// The block format holding the most decoder-layer weights (`per_matrix`: weights of each
    /// of a layer's seven matrices).
    pub fn dominant(&self, per_matrix: [usize; 7]) -> Format {
        let mut best = (0usize, Format::Q8_0);
        for f in Format::BLOCK_FORMATS {
            let n: usize = self
                .layers
                .iter()
                .flat_map(|r| r.iter().zip(per_matrix))
                .filter(|(g, _)| **g == f)
                .map(|(_, k)| k)
                .sum();
            if n > best.0 {
                best = (n, f);
            }
        }
        best.1
    }
}

/// llama.cpp's `general.file_type` (`llama_ftype`) of a file of type `ft` whose decoder
/// weights are mostly `dominant`: a mix is named as llama-quantize names it; a single format
/// by what most of the weights are stored as (a `q4_k` file whose rows fell back to `Q5_0` is
/// labelled `MOSTLY_Q5_0`).
pub fn llama_ftype(ft: FileType, dominant: Format) -> u32 {
    match ft {
        FileType::Q4KS => 14,
        FileType::Q4KM => 15,
        FileType::Q5KS => 16,
        FileType::Q5KM => 17,
        FileType::Single(_) => match dominant {
            Format::Q4_0 => 2,
            Format::Q4_1 => 3,
            Format::Q8_0 => 7,
            Format::Q5_0 => 8,
            Format::Q5_1 => 9,
            Format::Q4K => 14,
            Format::Q5K => 16,
            Format::Q6K => 18,
            Format::Iq4Nl => 25,
            Format::Iq4Xs => 30,
            Format::Affine { .. } => 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_more_bits_is_llama_cpps() {
        // n = 30: the first 3, the last 4, and every third from layer 5.
        let picked: Vec<usize> = (0..30).filter(|&i| more(i, 30)).collect();
        assert_eq!(picked, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]);
    }

    /// An override takes the tensors whose names contain its pattern; a pattern that takes
    /// none (a typo, or every match already taken by an earlier pattern) is refused by name.
    #[test]
    fn an_override_that_takes_no_tensor_is_refused() {
        let cfg = crate::export::tiny_llama::tiny_llama_config();
        let ov = |s: &[&str]| {
            s.iter()
                .map(|p| p.parse().unwrap())
                .collect::<Vec<TensorOverride>>()
        };
        let t = choose(FileType::Q4KM, &cfg, false, false, &ov(&["attn_v=q8_0"])).unwrap();
        assert!(t.layers.iter().all(|row| row[2] == Format::Q8_0));
        for bad in [&["atn_v=q8_0"][..], &["attn=q8_0", "attn_v=q4_0"]] {
            let e = choose(FileType::Q4KM, &cfg, false, false, &ov(bad))
                .unwrap_err()
                .to_string();
            let last = bad[bad.len() - 1];
            assert!(
                e.contains(&format!("`tensor_type` {last}")) && e.contains("matches no tensor"),
                "{e}"
            );
        }
    }

    /// llama-quantize's `IQ4_XS`: rows of 256-multiples stay `IQ4_XS`, others fall back to
    /// `IQ4_NL`; `attn_v` takes `Q5_K` once 4 query heads share a KV head; without calibration
    /// the first eighth of `ffn_down` takes `Q5_K`; the head `Q6_K`.
    #[test]
    fn iq4_files_follow_llama_quantize() {
        let mut cfg = crate::export::tiny_llama::tiny_llama_config();
        (
            cfg.d_model,
            cfg.d_ff,
            cfg.n_layer,
            cfg.n_head,
            cfg.n_kv_head,
        ) = (512, 768, 8, 8, 2);
        let ft = FileType::Single(Format::Iq4Xs);
        let t = choose(ft, &cfg, false, false, &[]).unwrap();
        assert_eq!(t.layers[0][2], Format::Q5K);
        assert_eq!(t.layers[0][6], Format::Q5K);
        assert_eq!(t.layers[1][6], Format::Iq4Xs);
        assert_eq!(t.layers[1][0], Format::Iq4Xs);
        assert_eq!(t.head, Some(Format::Q6K));
        let t = choose(ft, &cfg, false, true, &[]).unwrap();
        assert_eq!(t.layers[0][6], Format::Iq4Xs);
        (cfg.d_model, cfg.n_kv_head) = (576, 4);
        let t = choose(ft, &cfg, false, true, &[]).unwrap();
        assert_eq!(t.layers[1][0], Format::Iq4Nl);
        assert_eq!(t.layers[1][2], Format::Iq4Nl);
        assert_eq!(t.head, Some(Format::Q8_0));
        assert_eq!(llama_ftype(ft, t.dominant([1; 7])), 25);
    }

    #[test]
    fn overrides_parse_and_refuse_by_field() {
        let o: TensorOverride = "attn_v=q8_0".parse().unwrap();
        assert_eq!((o.pattern.as_str(), o.format), ("attn_v", Format::Q8_0));
        for bad in ["attn_v", "=q8_0", "attn_v=q2_k"] {
            let e = bad.parse::<TensorOverride>().unwrap_err().to_string();
            assert!(e.contains("`tensor_type`"), "{bad}: {e}");
        }
        assert!(
            "q4_k_x"
                .parse::<FileType>()
                .unwrap_err()
                .to_string()
                .contains("q4_k_m")
        );
    }
}
