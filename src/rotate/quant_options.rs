//! What `orthoformer quantize` runs: one configuration (with its baselines) or QuaRot's grid,
//! over how many tokens of each text, with which study settings. `Default` holds the
//! command's only defaults.

use super::quant_study::{
    QuantConfig, RotateChoice, StudySettings, quarot_grid, single_with_baselines,
};

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
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// Window, weight group and seed.
    pub study: StudySettings,
}

impl Default for QuantizeOptions {
    /// The unquantised, unrotated model on 1,024 tokens per text, [`StudySettings::default`].
    fn default() -> Self {
        QuantizeOptions {
            wbits: 16,
            abits: 16,
            rotate: RotateChoice::None,
            online_hadamard: false,
            table: false,
            max_tokens: 1024,
            study: StudySettings::default(),
        }
    }
}

impl QuantizeOptions {
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
