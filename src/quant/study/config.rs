//! The quantisation study of `orthoformer quantize`: configurations (weight, activation and
//! KV-cache bits, QuaRot's rotation set, the weight rounding), the grid QuaRot's table runs,
//! and how a configuration sets up the engine ([`configure`]: its online transforms,
//! activation quantisation and quantised KV cache, [`RuntimeQuant`], [`KvDtype`]), exactly as
//! `eval` runs a written file with those flags. The runs are in [`super::run`], the
//! report in [`super::report`].

use serde::Serialize;

use crate::model::llama::{KvDtype, Llama, RuntimeQuant};
use crate::quant::GptqOptions;
pub use crate::rotate::set::{RotateChoice, RotationSet};

/// How the study rounds weights (symmetric, per output channel or group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightRounding {
    /// Round to nearest over the full range.
    Rtn,
    /// Round to nearest with each group's clip ratio searched (error weighted by the
    /// calibration inputs' energy).
    RtnClip,
    /// GPTQ on calibration Hessians ([`StudySettings::gptq`]).
    Gptq,
    /// llama.cpp's per-block scale (and minimum) search, without calibration: what
    /// `llama-quantize` does without an importance matrix (GGUF block formats only).
    Search,
    /// The same search weighted by the calibration inputs' energy, llama.cpp's importance
    /// matrix: what `llama-quantize --imatrix` does (GGUF block formats only).
    Imatrix,
}

impl WeightRounding {
    /// The names [`str::parse`] takes.
    pub const NAMES: [&'static str; 5] = ["rtn", "rtn-clip", "gptq", "search", "imatrix"];

    /// Whether it needs a GGUF block format (the study's affine grids have no block search).
    pub fn needs_block_format(self) -> bool {
        matches!(self, WeightRounding::Search | WeightRounding::Imatrix)
    }
}

impl std::str::FromStr for WeightRounding {
    type Err = crate::Error;

    /// One of [`WeightRounding::NAMES`]; anything else names the `method` field.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "rtn" => Ok(WeightRounding::Rtn),
            "rtn-clip" => Ok(WeightRounding::RtnClip),
            "gptq" => Ok(WeightRounding::Gptq),
            "search" => Ok(WeightRounding::Search),
            "imatrix" => Ok(WeightRounding::Imatrix),
            other => Err(crate::quant::QuantError::Invalid(format!(
                "`method` {other:?}: use one of {}",
                WeightRounding::NAMES.join(", ")
            ))
            .into()),
        }
    }
}

impl WeightRounding {
    /// The name in row labels.
    pub fn label(self) -> &'static str {
        match self {
            WeightRounding::Rtn => "RTN",
            WeightRounding::RtnClip => "RTN+clip",
            WeightRounding::Gptq => "GPTQ",
            WeightRounding::Search => "search",
            WeightRounding::Imatrix => "imatrix",
        }
    }

    /// Whether it needs calibration text.
    pub fn calibrates(self) -> bool {
        !matches!(self, WeightRounding::Rtn | WeightRounding::Search)
    }
}

/// One configuration of the study.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantConfig {
    /// Row label (`W4A4KV4 GPTQ + R1+R2+R3+R4`).
    pub name: String,
    /// Weight bits (16: unquantised).
    pub wbits: u32,
    /// Activation bits at the inputs of the decoder's linear layers (16: unquantised).
    pub abits: u32,
    /// KV-cache bits (16: f32).
    pub kv_bits: u32,
    /// Rotations.
    pub rotations: RotationSet,
    /// How weights are rounded (when `wbits < 16`).
    pub method: WeightRounding,
}

impl QuantConfig {
    /// A configuration labelled from its fields.
    pub fn new(
        (wbits, abits, kv_bits): (u32, u32, u32),
        rotations: RotationSet,
        method: WeightRounding,
    ) -> Self {
        let fp = wbits >= 16 && abits >= 16 && kv_bits >= 16;
        let mut name = if fp {
            "FP".to_string()
        } else {
            let kv = if kv_bits < 16 {
                format!("KV{kv_bits}")
            } else {
                String::new()
            };
            format!("W{wbits}A{abits}{kv}")
        };
        if wbits < 16 {
            name = format!("{name} {}", method.label());
        }
        if rotations.any() {
            name = format!("{name} + {}", rotations.label());
        }
        QuantConfig {
            name,
            wbits,
            abits,
            kv_bits,
            rotations,
            method,
        }
    }

    /// Whether neither weights, activations nor the KV cache are quantised.
    pub fn is_full_precision(&self) -> bool {
        self.wbits >= 16 && self.abits >= 16 && self.kv_bits >= 16
    }

    /// Whether its weights are rounded by a method that needs calibration text.
    pub fn calibrates(&self) -> bool {
        self.wbits < 16 && self.method.calibrates()
    }

    /// Whether anything in it is drawn from the seed (a rotation; folding alone is not).
    pub fn is_seeded(&self) -> bool {
        let r = self.rotations;
        r.residual.kind().is_some() || r.heads || r.down
    }
}

/// The bit widths of QuaRot's table: W8A8, W4A16, W4A8, W4A4 and W4A4KV4.
pub const GRID_BITS: [(u32, u32, u32); 5] =
    [(8, 8, 16), (4, 16, 16), (4, 8, 16), (4, 4, 16), (4, 4, 4)];

/// QuaRot's grid: the unquantised model unrotated, with `R1` and with `R1`-`R4`; then for
/// every method in `methods` and every one of those rotation sets, the [`GRID_BITS`].
pub fn quarot_grid(methods: &[WeightRounding], residual: RotateChoice) -> Vec<QuantConfig> {
    grid_of(
        methods,
        &[
            RotationSet::NONE,
            RotationSet::residual(residual),
            RotationSet::full(residual),
        ],
    )
}

/// [`quarot_grid`] with the folding control beside the unrotated column: the norms folded as
/// for `R1`, nothing rotated ([`RotateChoice::Identity`]; unseeded, so it costs what the
/// unrotated column costs).
pub fn quarot_grid_with_fold(
    methods: &[WeightRounding],
    residual: RotateChoice,
) -> Vec<QuantConfig> {
    grid_of(
        methods,
        &[
            RotationSet::NONE,
            RotationSet::residual(RotateChoice::Identity),
            RotationSet::residual(residual),
            RotationSet::full(residual),
        ],
    )
}

/// The unquantised model under every set, then per method and set the [`GRID_BITS`].
fn grid_of(methods: &[WeightRounding], sets: &[RotationSet]) -> Vec<QuantConfig> {
    let first = methods.first().copied().unwrap_or(WeightRounding::Rtn);
    let mut c: Vec<QuantConfig> = sets
        .iter()
        .map(|&s| QuantConfig::new((16, 16, 16), s, first))
        .collect();
    for &m in methods {
        for &s in sets {
            c.extend(GRID_BITS.iter().map(|&b| QuantConfig::new(b, s, m)));
        }
    }
    c
}

/// One configuration per method with the baselines that make it readable: the unquantised
/// model (when anything is changed) and the rotated unquantised model (when rotated and
/// quantised).
pub fn single_with_baselines(
    bits: (u32, u32, u32),
    rotations: RotationSet,
    methods: &[WeightRounding],
) -> Vec<QuantConfig> {
    let quantised = bits.0 < 16 || bits.1 < 16 || bits.2 < 16;
    let first = methods.first().copied().unwrap_or(WeightRounding::Rtn);
    let mut c = Vec::new();
    if rotations.any() || quantised {
        c.push(QuantConfig::new((16, 16, 16), RotationSet::NONE, first));
    }
    if rotations.any() && quantised {
        c.push(QuantConfig::new((16, 16, 16), rotations, first));
    }
    if quantised && bits.0 < 16 {
        c.extend(
            methods
                .iter()
                .map(|&m| QuantConfig::new(bits, rotations, m)),
        );
    } else {
        c.push(QuantConfig::new(bits, rotations, first));
    }
    c
}

/// Settings shared by every configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StudySettings {
    /// Window of the sliding-window perplexity (stride: half of it).
    pub context: usize,
    /// Weight group size along the input dimension (0: one scale per output channel).
    pub group: usize,
    /// Weights rounded on an asymmetric grid (a zero point per channel or group), else
    /// symmetric (`±max`).
    pub weight_asym: bool,
    /// Activations keep this fraction of their range (per token; 1: the full range).
    pub act_clip: f32,
    /// Activations rounded on an asymmetric grid (a zero point per token), else symmetric.
    pub act_asym: bool,
    /// Values per KV-cache group inside a head (0: one per head).
    pub kv_group: usize,
    /// GPTQ's damping and column order.
    pub gptq: GptqOptions,
}

/// Sets `model`'s activation quantiser, `R3` and KV-cache type for configuration `c`.
pub fn configure(model: &mut Llama, c: &QuantConfig, s: StudySettings) -> crate::Result<()> {
    // A table's unquantised rows run without the activation settings they would not use.
    let (clip, asym) = if c.abits < 16 {
        (s.act_clip, s.act_asym)
    } else {
        (1.0, false)
    };
    model.set_runtime(&RuntimeQuant::new(c.abits, clip, asym, c.rotations.qk)?)?;
    model.kv_dtype = if c.kv_bits < 16 {
        KvDtype::Quant {
            bits: c.kv_bits,
            group: s.kv_group,
        }
    } else {
        KvDtype::F32
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::study::run::seeds_of;

    #[test]
    fn the_grid_and_single_configurations() {
        let methods = [WeightRounding::Rtn, WeightRounding::Gptq];
        let g = quarot_grid(&methods, RotateChoice::Hadamard);
        assert_eq!(g.len(), 3 + 2 * 3 * 5);
        assert!(g[0].is_full_precision() && !g[0].rotations.any());
        assert_eq!(g[2].name, "FP + R1+R2+R3+R4");
        let names: Vec<&str> = g.iter().map(|c| c.name.as_str()).collect();
        assert!(names.contains(&"W4A4KV4 GPTQ + R1+R2+R3+R4"), "{names:?}");
        assert!(names.contains(&"W8A8 RTN"), "{names:?}");
        let one = single_with_baselines(
            (4, 8, 16),
            RotationSet::residual(RotateChoice::Hadamard),
            &[WeightRounding::Rtn],
        );
        let names: Vec<&str> = one.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["FP", "FP + R1", "W4A8 RTN + R1"]);
        let none = single_with_baselines((16, 16, 16), RotationSet::NONE, &methods);
        assert_eq!(none.len(), 1);
        let w8 = single_with_baselines((8, 8, 16), RotationSet::NONE, &methods);
        assert_eq!(w8.len(), 3, "FP, then one row per method");
        let kv = single_with_baselines((16, 16, 4), RotationSet::NONE, &methods);
        assert_eq!(kv[1].name, "W16A16KV4");
        assert!(!g[0].is_seeded() && g[1].is_seeded());
        assert_eq!(seeds_of(&g[0], &[3, 4]), &[3]);
        assert_eq!(seeds_of(&g[1], &[3, 4]), &[3, 4]);
        let f = quarot_grid_with_fold(&methods, RotateChoice::Hadamard);
        assert_eq!(f.len(), 4 + 2 * 4 * 5);
        let names: Vec<&str> = f.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names[..4],
            ["FP", "FP + fold", "FP + R1", "FP + R1+R2+R3+R4"]
        );
        assert!(names.contains(&"W4A16 RTN + fold"), "{names:?}");
        // Folding draws nothing: its rows run once, whatever the seeds.
        assert!(!f[1].is_seeded() && f[2].is_seeded());
        assert_eq!(seeds_of(&f[1], &[3, 4]), &[3]);
    }
}
