//! What `orthoformer quantize` runs: one configuration (with its baselines) or QuaRot's grid,
//! over how many tokens of each text, with which study settings, methods and seeds.
//! `Default` holds the command's only defaults.

use std::path::Path;

use super::{FileType, QuantError};
use crate::quant::GptqOptions;

use super::study::{
    QuantConfig, RotateChoice, RotationSet, StudySettings, WeightRounding, quarot_grid,
    quarot_grid_with_fold, single_with_baselines,
};

impl Default for StudySettings {
    /// Perplexity windows of 256 (stride 128), one weight scale per output channel,
    /// symmetric activations over their full range, one KV group per head, GPTQ's defaults.
    fn default() -> Self {
        StudySettings {
            context: 256,
            group: 0,
            weight_asym: false,
            act_clip: 1.0,
            act_asym: false,
            kv_group: 0,
            gptq: GptqOptions::default(),
        }
    }
}

/// The options of `orthoformer quantize`'s study.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizeOptions {
    /// Weight bits (16: unquantised).
    pub wbits: u32,
    /// Activation bits at the inputs of the decoder's linear layers (16: unquantised).
    pub abits: u32,
    /// KV-cache bits (16: f32).
    pub kv_bits: u32,
    /// Rotations (for `table`, `R1`'s kind, Hadamard when none; identity adds the folding
    /// control's column to a Hadamard grid).
    pub rotations: RotationSet,
    /// Weight roundings, each run in the same study.
    pub method: Vec<WeightRounding>,
    /// Run QuaRot's whole grid instead of one configuration.
    pub table: bool,
    /// Tokens scored per text (at most).
    pub max_tokens: usize,
    /// Rotation seeds (a rotated configuration runs once per seed).
    pub seed: Vec<u64>,
    /// Calibration tokens for GPTQ and the clipping search (about the last this many tokens of
    /// the first text).
    pub calib_tokens: usize,
    /// Window, weight group, activation, KV and GPTQ settings.
    pub study: StudySettings,
    /// `out` only: calibrate layer by layer on the already-quantised layers' outputs
    /// (GPTQ's reference order) instead of once on the unquantised model.
    pub sequential: bool,
}

/// The fewest calibration tokens accepted.
pub const MIN_CALIB_TOKENS: usize = 16;

impl Default for QuantizeOptions {
    /// The unquantised, unrotated model on 1,024 tokens per text, RTN, seed 0, 4,096
    /// calibration tokens, [`StudySettings::default`], calibration in one pass.
    fn default() -> Self {
        QuantizeOptions {
            wbits: 16,
            abits: 16,
            kv_bits: 16,
            rotations: RotationSet::NONE,
            method: vec![WeightRounding::Rtn],
            table: false,
            max_tokens: 1024,
            seed: vec![0],
            calib_tokens: 4096,
            study: StudySettings::default(),
            sequential: false,
        }
    }
}

fn invalid(msg: String) -> crate::Error {
    QuantError::Invalid(msg).into()
}

impl QuantizeOptions {
    /// Why these options cannot be written as one `ft` file at `out`, naming the field.
    pub fn validate_file(&self, out: &Path, ft: FileType) -> crate::Result<()> {
        let o = self;
        let format = ft.base();
        if format.file_name().is_none() {
            return Err(invalid(
                "`gguf_type`: a file is written in a GGUF block format, not a study grid".into(),
            ));
        }
        let name = ft.name();
        let s = &o.study;
        if o.table {
            return Err(invalid(
                "`table` runs the study and writes nothing; drop `out` or `table`".into(),
            ));
        }
        if o.abits < 16 || s.act_clip != 1.0 || s.act_asym || o.kv_bits != 16 || s.kv_group != 0 {
            return Err(invalid(
                "`abits`, `act_clip`, `act_asym`, `kv_bits` and `kv_group` act at run time, not in \
                 the file: drop them with `out` and give them to eval or generate"
                    .into(),
            ));
        }
        if s.weight_asym {
            return Err(invalid(format!(
                "`weight_asym`: the symmetry of a file's weights is its block format's (q8_0 and \
                 q4_0 symmetric, q4_1 and q4_k with a minimum); drop it and choose `gguf_type` ({name} now)"
            )));
        }
        if o.seed.len() != 1 || o.method.len() != 1 {
            return Err(invalid(
                "`out` writes one file: give one `seed` and one `method`".into(),
            ));
        }
        if o.sequential && !o.method.iter().all(|m| m.calibrates()) {
            return Err(invalid(
                "`sequential` calibrates layer by layer: use it with `method` gptq, imatrix or \
                 rtn-clip"
                    .into(),
            ));
        }
        if o.wbits != 16 && o.wbits != format.bits() {
            return Err(invalid(format!(
                "`wbits` {} does not match `gguf_type` {name} ({}-bit); set it to {} or leave it out",
                o.wbits,
                format.bits(),
                format.bits()
            )));
        }
        if s.group != 0 && s.group != 32 {
            return Err(invalid(format!(
                "`group` {}: GGUF {name} stores one scale per 32 weights (the K-quants: per 32 or \
                 16 in super-blocks of 256); set it to 32 or leave it out",
                s.group
            )));
        }
        if out.extension().is_none_or(|e| e != "gguf") {
            return Err(invalid(format!(
                "`out` {}: a quantised model is written as a .gguf file; name it *.gguf",
                out.display()
            )));
        }
        Ok(())
    }

    /// Why these options are not a study, naming the field.
    pub fn validate(&self) -> crate::Result<()> {
        self.check().map_err(|m| QuantError::Invalid(m).into())
    }

    fn check(&self) -> Result<(), String> {
        let s = &self.study;
        if s.context < 2 {
            return Err(format!("`context` must be at least 2 (got {})", s.context));
        }
        if !(s.act_clip > 0.0 && s.act_clip <= 1.0) {
            return Err(format!(
                "`act_clip` {}: use a ratio above 0 and at most 1",
                s.act_clip
            ));
        }
        for (name, b) in [("wbits", self.wbits), ("abits", self.abits)] {
            if !matches!(b, 4 | 8 | 16) {
                return Err(format!("`{name}` {b}: use 16, 8 or 4"));
            }
        }
        if !matches!(self.kv_bits, 4 | 8 | 16) {
            return Err(format!("`kv_bits` {}: use 16, 8 or 4", self.kv_bits));
        }
        // Settings of what one configuration leaves unquantised would be silently unused.
        if !self.table && self.abits >= 16 && (s.act_clip != 1.0 || s.act_asym) {
            return Err(
                "`act_clip` and `act_asym` shape quantised activations: set `abits` to 8 or 4"
                    .into(),
            );
        }
        if !self.table && self.kv_bits >= 16 && s.kv_group != 0 {
            return Err("`kv_group` shapes a quantised KV cache: set `kv_bits` to 8 or 4".into());
        }
        if self.method.is_empty() {
            return Err("`method`: give at least one".into());
        }
        if self.seed.is_empty() {
            return Err("`seed`: give at least one".into());
        }
        let d = s.gptq.damp;
        if !(d.is_finite() && (0.0..=1.0).contains(&d)) {
            return Err(format!(
                "`damp` {d} must be a number from 0 to 1 (a fraction of the mean Hessian diagonal)"
            ));
        }
        if self.calib_tokens < MIN_CALIB_TOKENS {
            return Err(format!(
                "`calib_tokens` {} must be at least {MIN_CALIB_TOKENS}",
                self.calib_tokens
            ));
        }
        if self.max_tokens < 2 {
            return Err(format!(
                "`max_tokens` must be at least 2 (got {})",
                self.max_tokens
            ));
        }
        Ok(())
    }

    /// The configurations these options run: QuaRot's grid, or the one asked for with the
    /// baselines it is read against.
    pub fn configs(&self) -> Vec<QuantConfig> {
        if self.table {
            // `identity` asks for the folding control's column beside the Hadamard R1.
            match self.rotations.residual {
                RotateChoice::None => quarot_grid(&self.method, RotateChoice::Hadamard),
                RotateChoice::Identity => {
                    quarot_grid_with_fold(&self.method, RotateChoice::Hadamard)
                }
                r => quarot_grid(&self.method, r),
            }
        } else {
            single_with_baselines(
                (self.wbits, self.abits, self.kv_bits),
                self.rotations,
                &self.method,
            )
        }
    }
}
