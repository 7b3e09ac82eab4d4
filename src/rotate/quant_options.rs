//! What `orthoformer quantize` runs: one configuration (with its baselines) or QuaRot's grid,
//! over how many tokens of each text, with which study settings. `Default` holds the
//! command's only defaults.

use super::quant_study::{
    QuantConfig, RotateChoice, StudySettings, WeightRounding, quarot_grid, single_with_baselines,
};
use crate::quant::GptqOptions;

impl Default for StudySettings {
    /// Perplexity windows of 256 (stride 128), one weight scale per output channel, seed 0.
    fn default() -> Self {
        StudySettings {
            context: 256,
            group: 0,
            seed: 0,
            weights: super::quant_study::WeightRounding::Rtn,
        }
    }
}

/// The options of `orthoformer quantize`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizeOptions {
    /// Weight bits (16: unquantised).
    pub wbits: u32,
    /// Activation bits at the inputs of the decoder's linear layers (16: unquantised).
    pub abits: u32,
    /// Rotation before quantising.
    pub rotate: RotateChoice,
    /// QuaRot's online Hadamard transform on every down_proj input.
    pub online_hadamard: bool,
    /// Run QuaRot's whole grid instead of one configuration.
    pub table: bool,
    /// Tokens scored per text (at most).
    pub max_tokens: usize,
    /// Window, weight group, seed and weight rounding.
    pub study: StudySettings,
    /// Calibration tokens of GPTQ and the clipping search, from the end of the first text.
    pub calib_tokens: usize,
    /// GPTQ's damping and column order for a written file (the study's GPTQ runs the
    /// defaults).
    pub gptq: GptqOptions,
}

impl Default for QuantizeOptions {
    /// The unquantised, unrotated model on 1,024 tokens per text, [`StudySettings::default`],
    /// 4,096 calibration tokens, [`GptqOptions::default`].
    fn default() -> Self {
        QuantizeOptions {
            wbits: 16,
            abits: 16,
            rotate: RotateChoice::None,
            online_hadamard: false,
            table: false,
            max_tokens: 1024,
            study: StudySettings::default(),
            calib_tokens: 4096,
            gptq: GptqOptions::default(),
        }
    }
}

/// The bit widths the study quantises to (16: unquantised).
pub const BITS: [u32; 3] = [16, 8, 4];

/// The fewest calibration tokens accepted.
pub const MIN_CALIB_TOKENS: usize = 16;

impl QuantizeOptions {
    /// Checks the options' own values (before any file is read).
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: String| Err(crate::Error::Rotate(super::RotateError::Invalid(m)));
        for (field, b) in [("wbits", self.wbits), ("abits", self.abits)] {
            if !BITS.contains(&b) {
                return bad(format!("`{field}` {b} is not one of 16, 8, 4"));
            }
        }
        if self.study.context < 2 {
            return bad("`context` must be at least 2".into());
        }
        if self.max_tokens == 0 {
            return bad("`max_tokens` must be at least 1".into());
        }
        if self.needs_calibration() && self.calib_tokens < MIN_CALIB_TOKENS {
            return bad(format!(
                "`calib_tokens` {} must be at least {MIN_CALIB_TOKENS}",
                self.calib_tokens
            ));
        }
        Ok(())
    }

    /// Whether the weight rounding reads calibration inputs (GPTQ, the clipping search).
    pub fn needs_calibration(&self) -> bool {
        self.study.weights != WeightRounding::Rtn
    }

    /// The configurations these options run: QuaRot's grid, or the one asked for with the
    /// baselines it is read against.
    pub fn configs(&self) -> Vec<QuantConfig> {
        if self.table {
            quarot_grid()
        } else {
            single_with_baselines(self.wbits, self.abits, self.rotate, self.online_hadamard)
        }
    }
}

impl RotateChoice {
    /// Every choice, as [`RotateChoice::name`] spells it.
    pub const NAMES: [&'static str; 3] = ["none", "random", "hadamard"];

    /// The choice's name (`none`, `random`, `hadamard`).
    pub fn name(self) -> &'static str {
        match self {
            RotateChoice::None => "none",
            RotateChoice::Random => "random",
            RotateChoice::Hadamard => "hadamard",
        }
    }
}

impl std::fmt::Display for RotateChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RotateChoice {
    type Err = crate::Error;

    /// `none`, `random` or `hadamard`; anything else names the `rotate` field.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "none" => Ok(RotateChoice::None),
            "random" => Ok(RotateChoice::Random),
            "hadamard" => Ok(RotateChoice::Hadamard),
            other => Err(crate::Error::Rotate(super::RotateError::Invalid(format!(
                "`rotate` {other:?}: use none, random or hadamard"
            )))),
        }
    }
}

/// The weight-rounding methods by name: round to nearest or GPTQ.
pub const METHOD_NAMES: [&str; 2] = ["rtn", "gptq"];

/// The weight rounding of `method` (`rtn`, `gptq`), with RTN's clipping search when `clip`.
pub fn weight_rounding(method: &str, clip: bool) -> crate::Result<WeightRounding> {
    match (method, clip) {
        ("gptq", _) => Ok(WeightRounding::Gptq),
        ("rtn", true) => Ok(WeightRounding::RtnClip),
        ("rtn", false) => Ok(WeightRounding::Rtn),
        (other, _) => Err(crate::Error::Rotate(super::RotateError::Invalid(format!(
            "`method` {other:?}: use rtn or gptq"
        )))),
    }
}
