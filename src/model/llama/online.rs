//! What the engine quantises and transforms at run time, QuaRot's online part: activation
//! quantisation of the linear layers' inputs, the Hadamard transform of every query and key
//! head after RoPE (`R3`), and the Hadamard transform of `down_proj`'s input (`R4`), whose
//! inverse a file written by `quantize --out --online-hadamard` holds folded into its
//! `down_proj` weights.
//!
//! Such a file records its `R4` as one extra tensor, [`DOWN_SIGNS`] (the transform's `F` random
//! signs). The engine reads it and applies the transform; llama.cpp refuses the file (it
//! counts the tensors it expects), which is right: without the transform it would run a
//! different function. Rotation and quantisation read owned weights and refuse it too
//! ([`refuse_owned`]), since they would drop the transform.

use super::config::LlamaConfig;
use super::forward::Llama;
use crate::io::gguf::GgufFile;
use crate::model::ModelError;
use crate::nn::group_quant::GroupQuant;
use crate::nn::hadamard_rows::OnlineHadamard;

/// The GGUF tensor of the `R4` signs (`F` values of ±1).
pub const DOWN_SIGNS: &str = "orthoformer.ffn_down_hadamard_signs";

/// The online `down_proj` transform `g` was written for, if any.
pub fn down_hadamard_of(g: &GgufFile, cfg: &LlamaConfig) -> crate::Result<Option<OnlineHadamard>> {
    if g.tensor(DOWN_SIGNS).is_none() {
        return Ok(None);
    }
    let signs = g.tensor_f32(DOWN_SIGNS, &[cfg.d_ff as u64])?;
    OnlineHadamard::new(cfg.d_ff, Some(signs))
        .map(Some)
        .map_err(|e| ModelError::Config(format!("{}: {e}", g.path.display())).into())
}

/// Refuses a file with an online `down_proj` transform where owned weights are read (to
/// rotate, quantise or export them), which would silently drop it.
pub fn refuse_owned(g: &GgufFile) -> Result<(), ModelError> {
    if g.tensor(DOWN_SIGNS).is_some() {
        return Err(ModelError::Config(format!(
            "{}: its down_proj weights expect an online Hadamard transform (tensor {DOWN_SIGNS}) \
             that rotation, quantisation and export would drop; run it with eval or generate, \
             or start from the model it was made from",
            g.path.display()
        )));
    }
    Ok(())
}

/// The run-time quantisation and transforms of [`Llama::set_runtime`].
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct RuntimeQuant {
    /// Quantiser of every decoder linear layer's input, per token (`None`: f32).
    pub act: Option<GroupQuant>,
    /// Apply `R3`: a Hadamard transform of order `D` on every query and key head after RoPE.
    pub qk_hadamard: bool,
}

impl RuntimeQuant {
    /// Activations at `abits` (16: f32), keeping `act_clip` of each token's range, on an
    /// asymmetric grid when `act_asym`, with `R3` when `qk_hadamard`. Refuses, naming the
    /// field, a clip or asymmetry with unquantised activations (they would be unused).
    pub fn new(
        abits: u32,
        act_clip: f32,
        act_asym: bool,
        qk_hadamard: bool,
    ) -> crate::Result<Self> {
        let bad = |m: String| crate::Error::from(ModelError::Config(m));
        if !matches!(abits, 4 | 8 | 16) {
            return Err(bad(format!("`abits` {abits}: use 16, 8 or 4")));
        }
        if abits >= 16 && (act_clip != 1.0 || act_asym) {
            return Err(bad(
                "`act_clip` and `act_asym` shape quantised activations: set `abits` to 8 or 4"
                    .into(),
            ));
        }
        let act = if abits < 16 {
            Some(GroupQuant::new(abits, 0, !act_asym, act_clip).map_err(|e| {
                bad(e
                    .replace("`bits`", "`abits`")
                    .replace("`clip`", "`act_clip`"))
            })?)
        } else {
            None
        };
        Ok(RuntimeQuant { act, qk_hadamard })
    }
}

impl Llama {
    /// Sets the activation quantiser and `R3` (the KV cache type is [`Llama::kv_dtype`]; `R4`
    /// comes with the weights). Refuses, naming the field, a head width with no Hadamard
    /// matrix, or an activation group that does not divide the widths it would split.
    pub fn set_runtime(&mut self, r: &RuntimeQuant) -> crate::Result<()> {
        let c = self.config();
        let dh = c.head_dim();
        if let Some(q) = r.act
            && q.group != 0
        {
            let widths = [c.d_model, c.n_head * dh, c.d_ff];
            if let Some(w) = widths.iter().find(|w| !w.is_multiple_of(q.group)) {
                return Err(ModelError::Config(format!(
                    "`act_group` {} does not divide the linear layers' input width {w}",
                    q.group
                ))
                .into());
            }
        }
        self.qk_hadamard =
            if r.qk_hadamard {
                Some(OnlineHadamard::new(dh, None).map_err(|e| {
                    ModelError::Config(format!("`qk_hadamard` on heads of {dh}: {e}"))
                })?)
            } else {
                None
            };
        self.act_quant = r.act;
        Ok(())
    }
}
