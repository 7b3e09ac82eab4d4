//! The run-time quantisation flags `eval`, `generate` and `quantize` share: activation bits,
//! clipping and symmetry at the inputs of the linear layers, and QuaRot's `R3` (the Hadamard
//! transform of every query and key head, for a quantised KV cache). They become the library's
//! [`RuntimeQuant`]; the KV cache type is each command's `--kv-cache`.

use orthoformer::model::llama::RuntimeQuant;

/// Flags of the engine's run-time quantisation.
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeQuantArgs {
    /// Activation bits at the inputs of the decoder's linear layers, one scale per token
    /// (16 = unquantised; lm_head's input stays f32).
    #[arg(long, default_value_t = 16, value_parser = bits_parser)]
    pub abits: u32,
    /// Activations keep this fraction of each token's range (QuaRot uses 0.9 at 4 bits).
    #[arg(long, default_value_t = 1.0)]
    pub act_clip: f32,
    /// Round activations on an asymmetric grid (a zero point per token) instead of ±max.
    #[arg(long)]
    pub act_asym: bool,
    /// Apply a Hadamard transform to every query and key head after RoPE (QuaRot's R3: the
    /// scores do not change, the cached keys lose their outliers before --kv-cache q4/q8).
    #[arg(long)]
    pub qk_hadamard: bool,
}

/// `--wbits`/`--abits`'s parser: 16, 8 or 4.
pub fn bits_parser(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(b @ (4 | 8 | 16)) => Ok(b),
        _ => Err(format!("{s:?} is not one of 16, 8, 4")),
    }
}

impl RuntimeQuantArgs {
    /// Whether any flag asks for something.
    pub fn any(&self) -> bool {
        self.abits < 16 || self.act_clip != 1.0 || self.act_asym || self.qk_hadamard
    }

    /// The library's settings these flags ask for (checked there).
    pub fn runtime(&self) -> anyhow::Result<RuntimeQuant> {
        Ok(RuntimeQuant::new(
            self.abits,
            self.act_clip,
            self.act_asym,
            self.qk_hadamard,
        )?)
    }
}
